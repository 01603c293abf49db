//! The pure part of completing an attempt: given what the adapter did, the row's next state.
//!
//! Owns: the seed's result table (SPEC §2.4) as one function, [`decide`], with its table test.
//! Must not know: SQL, tokio, clocks or randomness (the jitter draw is passed in).

use wharf_core::action::StopReason;
use wharf_core::backoff::Backoff;

use super::attempt::FenceStage;
use super::kind::{ErrorCode, Outcome};
use crate::store::outbox::{CompletionRow, Next};

/// Longest deferral: a day. A longer wait is a schedule; enqueue with `run_at` instead.
pub const DEFER_MS_MAX: u64 = 24 * 60 * 60 * 1_000;
/// Longest readback reference kept, in bytes; a longer one is dropped rather than failing the
/// whole completion batch on the column's check.
pub const READBACK_REF_BYTES_MAX: usize = 1_024;

/// How one call of `execute` went, as the executor saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ran {
    /// The adapter returned.
    Returned(Outcome),
    /// The adapter panicked.
    Panicked,
    /// The adapter overran the kind's call timeout and was cut off.
    TimedOut,
}

impl Ran {
    /// The `result` label of `wharf_action_attempts_total`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Ran::Returned(outcome) => outcome.label(),
            Ran::Panicked => "panic",
            Ran::TimedOut => "timeout",
        }
    }
}

/// What one attempt's claim knows, for [`decide`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim {
    pub(crate) id: i64,
    pub(crate) epoch: i64,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
}

fn ended(claim: Claim, reason: StopReason, code: Option<&ErrorCode>) -> CompletionRow {
    CompletionRow {
        id: claim.id,
        epoch: claim.epoch,
        next: Next::Ended(reason),
        readback_ref: None,
        error_code: code.map(|c| c.as_str().to_owned()),
        clear_fence: false,
    }
}

fn waiting(
    claim: Claim,
    delay_ms: u64,
    refund: i32,
    clear_fence: bool,
    code: Option<&ErrorCode>,
) -> CompletionRow {
    CompletionRow {
        id: claim.id,
        epoch: claim.epoch,
        next: Next::Again {
            delay_ms: i64::try_from(delay_ms).unwrap_or(i64::MAX),
            refund,
        },
        readback_ref: None,
        error_code: code.map(|c| c.as_str().to_owned()),
        clear_fence,
    }
}

/// A retry, or the end of the attempts. `clear_fence` only for a proven retry.
fn retry(claim: Claim, delay_ms: u64, clear_fence: bool, code: &ErrorCode) -> CompletionRow {
    if claim.attempt >= claim.max_attempts {
        ended(claim, StopReason::AttemptsExhausted, Some(code))
    } else {
        waiting(claim, delay_ms, 0, clear_fence, Some(code))
    }
}

/// The completion to record for one attempt, or `None` when nothing may be recorded
/// (Abandoned: another holder owns the action).
///
/// - An adapter's own answer follows the seed's table.
/// - A panic or a timeout counts as Retry while the fence was not passed (nothing can have been
///   written; `write_started_at` of an earlier attempt is kept, because this attempt proved
///   nothing), and as Uncertain once it may have been passed.
///
/// `claim_marked`: this attempt's claim recorded `write_started_at` as its fence (SPEC §2.3)
/// and no earlier attempt had; an attempt that then never passed its fence clears that mark
/// again, because it proves nothing was written.
pub(crate) fn decide(
    claim: Claim,
    ran: &Ran,
    fence: FenceStage,
    claim_marked: bool,
    backoff: &Backoff,
    jitter_draw: f64,
) -> Option<CompletionRow> {
    let backoff_ms = || backoff.delay_ms(claim.attempt, jitter_draw);
    // A Retry or a Defer proves only that THIS attempt wrote nothing. Clear the mark only when
    // this attempt set it (passed, or may have passed, its own fence): a reclaimed attempt that
    // answers before its fence keeps the mark of the earlier attempt that may have written, so
    // the next attempt still reads back (SPEC §2.4).
    let clear_fence = fence != FenceStage::NotStarted || claim_marked;
    let crashed = |code: &ErrorCode| match fence {
        FenceStage::NotStarted => retry(claim, backoff_ms(), claim_marked, code),
        FenceStage::InFlight | FenceStage::Passed => {
            ended(claim, StopReason::UncertainProvider, Some(code))
        }
    };
    let row = match ran {
        Ran::Panicked => crashed(&ErrorCode::ADAPTER_PANIC),
        Ran::TimedOut => crashed(&ErrorCode::ADAPTER_TIMEOUT),
        Ran::Returned(outcome) => match outcome {
            Outcome::Done { readback_ref } => {
                let mut row = ended(claim, StopReason::Done, None);
                row.readback_ref = readback_ref
                    .as_ref()
                    .filter(|r| r.len() <= READBACK_REF_BYTES_MAX)
                    .cloned();
                row
            }
            Outcome::Retry { after, code } => {
                let delay = match after {
                    Some(after) => u64::try_from(after.as_millis())
                        .unwrap_or(u64::MAX)
                        .min(backoff.cap_ms),
                    None => backoff_ms(),
                };
                retry(claim, delay, clear_fence, code)
            }
            Outcome::Defer { until } => {
                let delay = u64::try_from(until.as_millis())
                    .unwrap_or(u64::MAX)
                    .min(DEFER_MS_MAX);
                waiting(claim, delay, 1, clear_fence, None)
            }
            Outcome::Uncertain { code } => ended(claim, StopReason::UncertainProvider, Some(code)),
            Outcome::Failed { code } => ended(claim, StopReason::ProviderRefused, Some(code)),
            Outcome::Cancelled { code } => ended(claim, StopReason::CancelledByAdapter, Some(code)),
            Outcome::Abandoned => return None,
        },
    };
    let mut row = row;
    // An attempt that never reached its fence wrote nothing, whatever it ended in: the mark
    // its claim made goes (an earlier attempt's mark is not the claim's, and stays).
    if claim_marked && fence == FenceStage::NotStarted {
        row.clear_fence = true;
    }
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const CODE: ErrorCode = ErrorCode::from_static("x");

    fn claim(attempt: u32, max_attempts: u32) -> Claim {
        Claim {
            id: 7,
            epoch: 3,
            attempt,
            max_attempts,
        }
    }

    /// (state, stop_reason, delay_ms, refund, clear_fence) or None.
    type Row = Option<(&'static str, Option<&'static str>, i64, i32, bool)>;

    fn check(claim: Claim, ran: Ran, fence: FenceStage, expected: Row) {
        let backoff = Backoff::default();
        let got = decide(claim, &ran, fence, false, &backoff, 0.0).map(|r| {
            let (delay_ms, refund) = r.next.delay_and_refund();
            let reason = r.next.stop_reason().map(StopReason::as_str);
            (
                r.next.state().as_str(),
                reason,
                delay_ms,
                refund,
                r.clear_fence,
            )
        });
        assert_eq!(
            got, expected,
            "{ran:?} at {fence:?}, attempt {}/{}",
            claim.attempt, claim.max_attempts
        );
    }

    #[test]
    fn the_seed_result_table() {
        use FenceStage::*;
        let done = Ran::Returned(Outcome::Done {
            readback_ref: Some("r".into()),
        });
        let retry = Ran::Returned(Outcome::Retry {
            after: None,
            code: CODE,
        });
        let retry_after = Ran::Returned(Outcome::Retry {
            after: Some(Duration::from_secs(7)),
            code: CODE,
        });
        let retry_far = Ran::Returned(Outcome::Retry {
            after: Some(Duration::from_secs(86_400)),
            code: CODE,
        });
        let defer = Ran::Returned(Outcome::Defer {
            until: Duration::from_millis(1_500),
        });
        let defer_far = Ran::Returned(Outcome::Defer {
            until: Duration::from_secs(10 * 86_400),
        });
        let uncertain = Ran::Returned(Outcome::Uncertain { code: CODE });
        let failed = Ran::Returned(Outcome::Failed { code: CODE });
        let cancelled = Ran::Returned(Outcome::Cancelled { code: CODE });
        let abandoned = Ran::Returned(Outcome::Abandoned);

        check(
            claim(1, 3),
            done,
            Passed,
            Some(("DONE", Some("DONE"), 0, 0, false)),
        );
        check(
            claim(1, 3),
            retry.clone(),
            Passed,
            Some(("ADMITTED", None, 2_000, 0, true)),
        );
        check(
            claim(2, 3),
            retry.clone(),
            Passed,
            Some(("ADMITTED", None, 4_000, 0, true)),
        );
        check(
            claim(3, 3),
            retry.clone(),
            Passed,
            Some(("FAILED", Some("ATTEMPTS_EXHAUSTED"), 0, 0, false)),
        );
        check(
            claim(1, 3),
            retry_after,
            NotStarted,
            Some(("ADMITTED", None, 7_000, 0, false)),
        );
        check(
            claim(1, 3),
            retry_far,
            Passed,
            Some(("ADMITTED", None, 900_000, 0, true)),
        );
        check(
            claim(3, 3),
            defer.clone(),
            NotStarted,
            Some(("ADMITTED", None, 1_500, 1, false)),
        );
        check(
            claim(1, 3),
            defer_far,
            Passed,
            Some(("ADMITTED", None, DEFER_MS_MAX as i64, 1, true)),
        );
        check(
            claim(1, 3),
            uncertain,
            Passed,
            Some(("UNCERTAIN", Some("UNCERTAIN_PROVIDER"), 0, 0, false)),
        );
        check(
            claim(1, 3),
            failed,
            Passed,
            Some(("FAILED", Some("PROVIDER_REFUSED"), 0, 0, false)),
        );
        check(
            claim(1, 3),
            cancelled,
            NotStarted,
            Some(("CANCELLED", Some("CANCELLED_BY_ADAPTER"), 0, 0, false)),
        );
        check(claim(1, 3), abandoned, NotStarted, None);
    }

    #[test]
    fn panics_and_timeouts_depend_on_the_fence() {
        use FenceStage::*;
        for ran in [Ran::Panicked, Ran::TimedOut] {
            check(
                claim(1, 3),
                ran.clone(),
                NotStarted,
                Some(("ADMITTED", None, 2_000, 0, false)),
            );
            check(
                claim(3, 3),
                ran.clone(),
                NotStarted,
                Some(("FAILED", Some("ATTEMPTS_EXHAUSTED"), 0, 0, false)),
            );
            check(
                claim(1, 3),
                ran.clone(),
                InFlight,
                Some(("UNCERTAIN", Some("UNCERTAIN_PROVIDER"), 0, 0, false)),
            );
            check(
                claim(1, 3),
                ran.clone(),
                Passed,
                Some(("UNCERTAIN", Some("UNCERTAIN_PROVIDER"), 0, 0, false)),
            );
        }
    }

    #[test]
    fn codes_and_references_are_kept_within_bounds() {
        let b = Backoff::default();
        let row = decide(
            claim(1, 1),
            &Ran::Panicked,
            FenceStage::Passed,
            false,
            &b,
            0.0,
        )
        .unwrap();
        assert_eq!(row.error_code.as_deref(), Some("adapter_panic"));
        let long = Ran::Returned(Outcome::Done {
            readback_ref: Some("r".repeat(READBACK_REF_BYTES_MAX + 1)),
        });
        assert_eq!(
            decide(claim(1, 1), &long, FenceStage::Passed, false, &b, 0.0)
                .unwrap()
                .readback_ref,
            None
        );
        let edge = Ran::Returned(Outcome::Done {
            readback_ref: Some("r".repeat(READBACK_REF_BYTES_MAX)),
        });
        assert!(
            decide(claim(1, 1), &edge, FenceStage::Passed, false, &b, 0.0)
                .unwrap()
                .readback_ref
                .is_some()
        );
    }

    #[test]
    fn a_claim_mark_is_cleared_only_by_an_attempt_that_never_passed_its_fence() {
        let b = Backoff::default();
        let retry = Ran::Returned(Outcome::Retry {
            after: None,
            code: CODE,
        });
        let defer = Ran::Returned(Outcome::Defer {
            until: std::time::Duration::from_secs(1),
        });
        for ran in [&retry, &defer, &Ran::Panicked, &Ran::TimedOut] {
            // The claim set the mark and the fence was never reached: nothing was written.
            let row = decide(claim(1, 3), ran, FenceStage::NotStarted, true, &b, 0.0).unwrap();
            assert!(row.clear_fence, "{ran:?}: a claim's own mark is cleared");
            // An earlier attempt's mark (claim_marked false) is kept.
            let row = decide(claim(1, 3), ran, FenceStage::NotStarted, false, &b, 0.0).unwrap();
            assert!(
                !row.clear_fence,
                "{ran:?}: an earlier attempt's mark is kept"
            );
        }
        // Ended before the fence (a refusal): the claim's mark goes too.
        let failed = Ran::Returned(Outcome::Failed { code: CODE });
        let row = decide(claim(1, 3), &failed, FenceStage::NotStarted, true, &b, 0.0).unwrap();
        assert_eq!(row.next, Next::Ended(StopReason::ProviderRefused));
        assert!(row.clear_fence);
        // Passed the fence: a panic may have written, so it ends UNCERTAIN, mark or not.
        let row = decide(
            claim(1, 3),
            &Ran::Panicked,
            FenceStage::Passed,
            true,
            &b,
            0.0,
        )
        .unwrap();
        assert_eq!(row.next, Next::Ended(StopReason::UncertainProvider));
    }
}
