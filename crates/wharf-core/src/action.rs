//! The outbox lifecycle: action states, the one transition table, stop reasons and kind traits.
//!
//! This module owns the rules; the PostgreSQL trigger in the `wharf` crate mirrors
//! [`ActionState::can_transition`] and a test compares the two over all 49 pairs. It knows
//! nothing of storage, adapters or time.

use std::fmt;
use std::str::FromStr;

/// Where an action is in its life. The strings are the database's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionState {
    /// Waits for `admit` or `refuse`.
    Proposed,
    /// Waits to be claimed (possibly until `run_at`).
    Admitted,
    /// Claimed by a worker holding a lease; `epoch` names the claim.
    Executing,
    /// The provider confirmed the effect. Ended.
    Done,
    /// The effect may exist; nothing sends it again. Ended.
    Uncertain,
    /// The provider refused it, or the attempts ran out. Ended.
    Failed,
    /// Nothing should be written. Ended.
    Cancelled,
}

impl ActionState {
    /// Every state, in lifecycle order.
    pub const ALL: [ActionState; 7] = [
        ActionState::Proposed,
        ActionState::Admitted,
        ActionState::Executing,
        ActionState::Done,
        ActionState::Uncertain,
        ActionState::Failed,
        ActionState::Cancelled,
    ];

    /// The database spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ActionState::Proposed => "PROPOSED",
            ActionState::Admitted => "ADMITTED",
            ActionState::Executing => "EXECUTING",
            ActionState::Done => "DONE",
            ActionState::Uncertain => "UNCERTAIN",
            ActionState::Failed => "FAILED",
            ActionState::Cancelled => "CANCELLED",
        }
    }

    /// An ended action never changes again and keeps no payload.
    pub const fn is_ended(self) -> bool {
        matches!(
            self,
            ActionState::Done
                | ActionState::Uncertain
                | ActionState::Failed
                | ActionState::Cancelled
        )
    }

    /// The transition table of `action-outbox.txt`, and nothing else:
    ///
    /// | from | to | when |
    /// |---|---|---|
    /// | PROPOSED | ADMITTED, CANCELLED | admitted or refused |
    /// | ADMITTED | EXECUTING | a claim (epoch and attempt +1) |
    /// | ADMITTED | ADMITTED | rescheduled while waiting (`drain`, an operator "run now") |
    /// | ADMITTED | CANCELLED | expired before it started, or cancelled by an operator |
    /// | EXECUTING | EXECUTING | a reclaim after the lease expired (epoch and attempt +1) |
    /// | EXECUTING | ADMITTED | a proven retry or a deferral |
    /// | EXECUTING | DONE, UNCERTAIN, FAILED, CANCELLED | the attempt ended the action |
    ///
    /// ADMITTED → ADMITTED is the one refinement of the seed's table: it changes no state, only
    /// when a waiting action is due, and `drain()` needs it. PROPOSED → PROPOSED stays refused:
    /// nothing edits a proposal.
    pub const fn can_transition(self, to: ActionState) -> bool {
        use ActionState::*;
        matches!(
            (self, to),
            (Proposed, Admitted | Cancelled)
                | (Admitted, Executing | Admitted | Cancelled)
                | (
                    Executing,
                    Executing | Admitted | Done | Uncertain | Failed | Cancelled
                )
        )
    }
}

/// As its database spelling ([`ActionState::as_str`]): the API's JSON and the database agree.
impl serde::Serialize for ActionState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for ActionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown action state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for ActionState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ActionState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// Why an action ended. Closed set; every ended action has exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The provider confirmed the effect.
    Done,
    /// The last allowed attempt asked for a retry.
    AttemptsExhausted,
    /// The provider refused the effect for good.
    ProviderRefused,
    /// The provider may hold the effect; nobody can tell.
    UncertainProvider,
    /// An at-most-once action lost its lease after its write started.
    LeaseLostAfterWrite,
    /// The action had not started by `expires_at`.
    Expired,
    /// The adapter decided nothing should be written (for example an unsubscribed recipient).
    CancelledByAdapter,
    /// A proposal was refused.
    Refused,
    /// An operator ended it.
    Operator,
}

impl StopReason {
    /// Every reason, for checks that list them (the database constraint, tests).
    pub const ALL: [StopReason; 9] = [
        StopReason::Done,
        StopReason::AttemptsExhausted,
        StopReason::ProviderRefused,
        StopReason::UncertainProvider,
        StopReason::LeaseLostAfterWrite,
        StopReason::Expired,
        StopReason::CancelledByAdapter,
        StopReason::Refused,
        StopReason::Operator,
    ];

    /// The database spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            StopReason::Done => "DONE",
            StopReason::AttemptsExhausted => "ATTEMPTS_EXHAUSTED",
            StopReason::ProviderRefused => "PROVIDER_REFUSED",
            StopReason::UncertainProvider => "UNCERTAIN_PROVIDER",
            StopReason::LeaseLostAfterWrite => "LEASE_LOST_AFTER_WRITE",
            StopReason::Expired => "EXPIRED",
            StopReason::CancelledByAdapter => "CANCELLED_BY_ADAPTER",
            StopReason::Refused => "REFUSED",
            StopReason::Operator => "OPERATOR",
        }
    }

    /// The ended state this reason belongs to. A reason never appears with another state.
    pub const fn state(self) -> ActionState {
        match self {
            StopReason::Done => ActionState::Done,
            StopReason::AttemptsExhausted | StopReason::ProviderRefused => ActionState::Failed,
            StopReason::UncertainProvider | StopReason::LeaseLostAfterWrite => {
                ActionState::Uncertain
            }
            StopReason::Expired
            | StopReason::CancelledByAdapter
            | StopReason::Refused
            | StopReason::Operator => ActionState::Cancelled,
        }
    }
}

/// As its database spelling ([`StopReason::as_str`]): the API's JSON and the database agree.
impl serde::Serialize for StopReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no stop reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stop reason {0:?}")]
pub struct UnknownStopReason(pub String);

impl FromStr for StopReason {
    type Err = UnknownStopReason;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StopReason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == s)
            .ok_or_else(|| UnknownStopReason(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActionState::*;

    #[test]
    fn transition_table_is_exactly_the_seed_plus_reschedule() {
        let allowed = [
            (Proposed, Admitted),
            (Proposed, Cancelled),
            (Admitted, Executing),
            (Admitted, Admitted),
            (Admitted, Cancelled),
            (Executing, Executing),
            (Executing, Admitted),
            (Executing, Done),
            (Executing, Uncertain),
            (Executing, Failed),
            (Executing, Cancelled),
        ];
        for from in ActionState::ALL {
            for to in ActionState::ALL {
                assert_eq!(
                    from.can_transition(to),
                    allowed.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn ended_states_have_no_way_out() {
        for from in ActionState::ALL.into_iter().filter(|s| s.is_ended()) {
            for to in ActionState::ALL {
                assert!(!from.can_transition(to), "{from} -> {to}");
            }
        }
    }

    /// The seed's table (`action-outbox.txt`, "The lifecycle") as the seed writes it, plus
    /// SPEC's one refinement (ADMITTED → ADMITTED, a reschedule), parsed from text: a second,
    /// independent statement of the table to check `can_transition` against.
    const SEED_TABLE: &str = "
        PROPOSED  | ADMITTED, CANCELLED
        ADMITTED  | EXECUTING
        ADMITTED  | CANCELLED
        EXECUTING | EXECUTING
        EXECUTING | ADMITTED
        EXECUTING | DONE, UNCERTAIN, FAILED, CANCELLED
        ADMITTED  | ADMITTED
    ";

    fn seed_allows(from: ActionState, to: ActionState) -> bool {
        SEED_TABLE
            .lines()
            .filter(|l| !l.trim().is_empty())
            .any(|line| {
                let (f, tos) = line.split_once('|').expect("from | to");
                f.trim() == from.as_str() && tos.split(',').any(|t| t.trim() == to.as_str())
            })
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn state() -> impl Strategy<Value = ActionState> {
            prop::sample::select(ActionState::ALL.to_vec())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Every pair agrees with the seed's own table.
            #[test]
            fn the_rust_table_is_the_seeds(from in state(), to in state()) {
                prop_assert_eq!(from.can_transition(to), seed_allows(from, to), "{} -> {}", from, to);
            }

            /// A life is a walk the seed's table allows: a path the Rust table accepts is one
            /// the seed's text accepts, and once ended it goes nowhere.
            #[test]
            fn every_accepted_walk_is_a_seed_walk(path in prop::collection::vec(state(), 1..12)) {
                let accepted = path.windows(2).all(|w| w[0].can_transition(w[1]));
                let seed = path.windows(2).all(|w| seed_allows(w[0], w[1]));
                prop_assert_eq!(accepted, seed);
                if accepted && let Some(i) = path.iter().position(|s| s.is_ended()) {
                    prop_assert_eq!(i, path.len() - 1, "an ended state moved on: {:?}", path);
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for state in ActionState::ALL {
            assert_eq!(state.as_str().parse::<ActionState>(), Ok(state));
        }
        for reason in StopReason::ALL {
            assert_eq!(reason.as_str().parse::<StopReason>(), Ok(reason));
            assert!(reason.state().is_ended());
        }
        assert!("RUNNING".parse::<ActionState>().is_err());
    }
}
