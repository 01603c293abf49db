//! The inbox's cursor and replay floor (SPEC §3.4 step 7–8, §3.5), as a model to explore.
//!
//! One stream; an honest producer with sequences `1..=sequences`, each with its own content.
//! Every step may happen at any moment, in every order:
//!
//! - `send s`: the producer sends (or re-sends, after a lost answer) envelope `s`.
//! - `decide s`: the server locks the stream, looks the identity up, asks
//!   `wharf_core::inbox::decide`, and commits the identity and the cursor walk
//!   (`wharf_core::inbox::advance_cursor`) and its audit in one transaction; only then does it
//!   answer.
//! - `answer s` reaches the producer, or is `lost` (a crash between commit and answer, a
//!   dropped connection); a request is `dropped` before its commit (a crash: nothing commits).
//! - `skip to`: an operator moves the cursor over a gap; `floor f`: an operator raises the
//!   replay floor, never past the cursor's next sequence.
//!
//! The invariants: the cursor never passes a missing sequence (every sequence at or below it
//! is retained or was skipped by an operator); the cursor never moves back; the floor never
//! passes the cursor; every acknowledged envelope is retained; no identity is stored twice.

use wharf_core::inbox::{Found, Incoming, Outcome, Retained, StreamState, advance_cursor, decide};

use crate::explore::{Invariant, Model};

/// A known-bad change, to show the explorer catches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The protocol as SPEC states it, with `wharf_core`'s decisions.
    Correct,
    /// The cursor jumps to the highest retained sequence, gaps or not.
    CursorJumpsGaps,
    /// An operator may raise the floor past the cursor (the gap check is gone).
    FloorPastCursor,
    /// The answer is sent before the commit, which a crash may then lose.
    AnswerBeforeCommit,
}

/// The bounds of one exploration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Sequences the producer has, 1..=8.
    pub sequences: u8,
    /// Whether operators skip and raise the floor.
    pub operators: bool,
    /// The protocol or a known-bad variant.
    pub variant: Variant,
}

/// The stream and everything in flight. Sets of sequences are bit masks (bit `s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct State {
    /// The contiguous cursor.
    pub cursor: u64,
    /// The replay floor.
    pub floor: u64,
    /// Retained identities.
    pub retained: u16,
    /// Sequences an operator skipped over.
    pub skipped: u16,
    /// Requests in flight, not decided yet.
    pub requests: u16,
    /// Answers in flight: acknowledgements.
    pub acks: u16,
    /// Committed? For [`Variant::AnswerBeforeCommit`]: decided and answered, commit pending.
    pub uncommitted: u16,
    /// What the producer holds as acknowledged.
    pub acknowledged: u16,
    /// What the producer was refused (and so stops sending).
    pub refused: u16,
    /// Ghost: an identity stored a second time.
    pub stored_twice: bool,
    /// Ghost: the cursor moved back.
    pub cursor_went_back: bool,
}

fn bit(s: u64) -> u16 {
    1 << s
}

fn has(mask: u16, s: u64) -> bool {
    mask & bit(s) != 0
}

/// One step, for traces.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// The producer sent this sequence.
    Send(u64),
    /// The request was lost before its commit.
    Dropped(u64),
    /// The server decided (and committed) it.
    Decide(u64, Outcome),
    /// The server answered before its commit ([`Variant::AnswerBeforeCommit`]).
    AnsweredUncommitted(u64),
    /// The pending commit happened.
    Commit(u64),
    /// A crash lost the pending commit.
    CrashBeforeCommit(u64),
    /// The acknowledgement reached the producer.
    Answered(u64),
    /// The acknowledgement was lost.
    AnswerLost(u64),
    /// An operator skipped to this sequence.
    Skip(u64),
    /// An operator raised the floor to this sequence.
    Floor(u64),
}

/// The inbox under `config`.
pub struct Inbox {
    config: Config,
}

impl Inbox {
    /// A model of the cursor and floor protocol (or a variant).
    pub fn new(config: Config) -> Inbox {
        assert!((1..=8).contains(&config.sequences));
        Inbox { config }
    }

    fn digest(s: u64) -> [u8; 32] {
        [s as u8; 32]
    }

    /// The server's decision and commit for envelope `s`, as one transaction.
    fn decide(&self, state: &State, s: u64) -> (State, Outcome) {
        let mut n = *state;
        let found = if has(state.retained, s) {
            let retained = Some(Retained {
                content_digest: Inbox::digest(s),
                producer_sequence: s,
            });
            Found {
                by_event_id: retained,
                by_idempotency_key: retained,
                by_sequence: Some(Inbox::digest(s)),
            }
        } else {
            Found::default()
        };
        let decision = decide(
            &StreamState {
                acknowledged_sequence: state.cursor,
                replay_floor: state.floor,
            },
            &Incoming {
                producer_sequence: s,
                content_digest: Inbox::digest(s),
            },
            &found,
        );
        if decision.store {
            if has(n.retained, s) {
                n.stored_twice = true;
            }
            n.retained |= bit(s);
            let before = n.cursor;
            n.cursor = match self.config.variant {
                Variant::CursorJumpsGaps => {
                    (0..16).rev().find(|&q| has(n.retained, q)).unwrap_or(0)
                }
                _ => {
                    let above: Vec<u64> =
                        (before + 1..16).filter(|&q| has(n.retained, q)).collect();
                    advance_cursor(before, &above)
                }
            };
            if n.cursor < before {
                n.cursor_went_back = true;
            }
        }
        (n, decision.outcome)
    }
}

impl Model for Inbox {
    type State = State;
    type Step = Step;

    fn init(&self) -> Vec<State> {
        vec![State {
            cursor: 0,
            floor: 0,
            retained: 0,
            skipped: 0,
            requests: 0,
            acks: 0,
            uncommitted: 0,
            acknowledged: 0,
            refused: 0,
            stored_twice: false,
            cursor_went_back: false,
        }]
    }

    fn next(&self, state: &State, out: &mut Vec<(Step, State)>) {
        let n_max = u64::from(self.config.sequences);
        for s in 1..=n_max {
            let done = has(state.acknowledged, s) || has(state.refused, s);
            if !done && !has(state.requests, s) && !has(state.acks, s) {
                let mut n = *state;
                n.requests |= bit(s);
                out.push((Step::Send(s), n));
            }
            if has(state.requests, s) {
                let mut dropped = *state;
                dropped.requests &= !bit(s);
                out.push((Step::Dropped(s), dropped));

                let (mut n, outcome) = self.decide(state, s);
                n.requests &= !bit(s);
                if outcome.is_acknowledged() {
                    n.acks |= bit(s);
                    if self.config.variant == Variant::AnswerBeforeCommit {
                        // The answer leaves now; the commit comes later, if at all.
                        let mut answered = *state;
                        answered.requests &= !bit(s);
                        answered.acks |= bit(s);
                        answered.uncommitted |= bit(s);
                        out.push((Step::AnsweredUncommitted(s), answered));
                        continue;
                    }
                } else {
                    n.refused |= bit(s);
                }
                out.push((Step::Decide(s, outcome), n));
            }
            if has(state.uncommitted, s) {
                let (mut n, _) = self.decide(state, s);
                n.uncommitted &= !bit(s);
                out.push((Step::Commit(s), n));
                let mut crashed = *state;
                crashed.uncommitted &= !bit(s);
                out.push((Step::CrashBeforeCommit(s), crashed));
            }
            if has(state.acks, s) {
                let mut n = *state;
                n.acks &= !bit(s);
                n.acknowledged |= bit(s);
                out.push((Step::Answered(s), n));
                let mut lost = *state;
                lost.acks &= !bit(s);
                out.push((Step::AnswerLost(s), lost));
            }
        }
        if self.config.operators {
            for to in state.cursor + 1..=n_max {
                let mut n = *state;
                for q in state.cursor + 1..=to {
                    if !has(n.retained, q) {
                        n.skipped |= bit(q);
                    }
                }
                let above: Vec<u64> = (to + 1..16).filter(|&q| has(n.retained, q)).collect();
                n.cursor = advance_cursor(to, &above);
                out.push((Step::Skip(to), n));
            }
            let floor_max = match self.config.variant {
                Variant::FloorPastCursor => n_max + 1,
                _ => (state.cursor + 1).min(n_max + 1),
            };
            for f in state.floor + 1..=floor_max {
                let mut n = *state;
                n.floor = f;
                out.push((Step::Floor(f), n));
            }
        }
    }

    fn invariants(&self) -> Vec<Invariant<'_, State>> {
        vec![
            (
                "the cursor never passes a missing sequence",
                Box::new(|s| (1..=s.cursor).all(|q| has(s.retained | s.skipped, q))),
            ),
            (
                "the cursor never moves back",
                Box::new(|s| !s.cursor_went_back),
            ),
            (
                "the floor never passes the cursor",
                Box::new(|s| s.floor <= s.cursor + 1),
            ),
            (
                "every acknowledged envelope is retained",
                Box::new(|s| s.acknowledged & !s.retained == 0),
            ),
            ("no identity is stored twice", Box::new(|s| !s.stored_twice)),
        ]
    }
}

/// Explores the inbox under `config`; see [`crate::explore::explore`].
pub fn check(config: Config, states_max: usize) -> crate::explore::ReportOf<Inbox> {
    crate::explore::explore(&Inbox::new(config), states_max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::show;

    const STATES_MAX: usize = 2_000_000;

    fn violated(variant: Variant, invariant: &str) {
        let config = Config {
            sequences: 3,
            operators: true,
            variant,
        };
        let report = check(config, STATES_MAX);
        let found = report
            .counterexample
            .unwrap_or_else(|| panic!("{config:?}: no counterexample in {} states", report.states));
        assert_eq!(found.invariant, invariant, "{}", show(&found));
    }

    #[test]
    fn the_cursor_and_floor_hold_with_retries_losses_and_operators() {
        for (sequences, operators) in [(4, false), (4, true)] {
            let config = Config {
                sequences,
                operators,
                variant: Variant::Correct,
            };
            let report = check(config, STATES_MAX);
            if let Some(c) = &report.counterexample {
                panic!("{config:?}\n{}", show(c));
            }
            assert!(!report.truncated, "{config:?}");
            assert!(
                report.states > 1_000,
                "{config:?}: {} states",
                report.states
            );
        }
    }

    #[test]
    fn the_bounds_reach_gaps_skips_replays_duplicates_and_lost_answers() {
        use crate::explore::reachable;
        let model = Inbox::new(Config {
            sequences: 3,
            operators: true,
            variant: Variant::Correct,
        });
        let goals: Vec<(&str, crate::explore::Goal<State>)> = vec![
            (
                "all acknowledged, cursor 3",
                Box::new(|s| s.cursor == 3 && s.acknowledged == 0b1110),
            ),
            (
                "a gap held open",
                Box::new(|s| s.cursor == 1 && has(s.retained, 3)),
            ),
            (
                "a skip over a gap",
                Box::new(|s| has(s.skipped, 2) && s.cursor >= 2),
            ),
            (
                "a replay refused",
                Box::new(|s| has(s.refused, 2) && !has(s.retained, 2)),
            ),
            (
                "a reordered accept below the cursor",
                Box::new(|s| has(s.skipped, 1) && has(s.retained, 1)),
            ),
            (
                "a retry of a retained envelope in flight",
                Box::new(|s| has(s.requests, 1) && has(s.retained, 1)),
            ),
        ];
        for (name, goal) in goals {
            assert!(reachable(&model, goal, STATES_MAX), "never reached: {name}");
        }
    }

    #[test]
    fn a_cursor_that_jumps_gaps_is_found() {
        violated(
            Variant::CursorJumpsGaps,
            "the cursor never passes a missing sequence",
        );
    }

    #[test]
    fn a_floor_past_the_cursor_is_found() {
        violated(
            Variant::FloorPastCursor,
            "the floor never passes the cursor",
        );
    }

    #[test]
    fn an_answer_before_the_commit_is_found() {
        violated(
            Variant::AnswerBeforeCommit,
            "every acknowledged envelope is retained",
        );
    }
}
