//! Token buckets as plain arithmetic: the one bucket behind every rate limit in wharf — the
//! inbox's peer and identity limiters (SPEC §3.4 steps 1 and 3) and the outbound delivery limit
//! (SPEC §3.8).
//!
//! Owns: how a bucket refills, what it holds at most, what taking or charging tokens does to it,
//! and how long until it holds enough (what a `Retry-After` header or a deferred delivery says).
//! Must not know keys, maps, locks, or what a token pays for: the inbox's `Limiter` and the
//! outbound `DeliveryBudget` keep one bucket per key and decide what costs how much. No clock:
//! every function takes the `now` its caller read, so tests move time instead of sleeping.
//!
//! # The model
//!
//! A [`Bucket`] holds `tokens` at `updated` and gains [`LimitPolicy::rate_per_s`] tokens a
//! second, never above [`LimitPolicy::burst`]. A first-seen key starts full, so a quiet client may
//! spend its whole burst at once.
//!
//! - [`Bucket::take`] is all or nothing: `n` tokens when the bucket holds `n`, else nothing is
//!   taken and the answer says how long until it will hold them — or that it never will, when
//!   `n` is more than the burst ([`Denied::OverBurst`]). Waiting cannot help such a request,
//!   so it must not be told to retry.
//! - [`Bucket::charge`] takes `n` tokens whether or not they are there, down to a bounded debt
//!   (negative tokens): for work that already happened (a claim that started deliveries). Debt
//!   refills like any shortfall, so the rate holds over time.
//! - A `now` earlier than `updated` (two clocks read in a different order) refills nothing and
//!   leaves `updated` alone: time never runs backwards for a bucket, and nothing panics.
//! - An infinite (or NaN) rate never limits: the bucket stays full.

use std::time::Duration;
use std::time::Instant;

/// How long a bucket that can never refill tells its caller to wait: a zero rate, a rate so small
/// the true wait does not fit a [`Duration`], or (for callers that take one token at a time) a
/// zero burst. An hour, not forever: an operator who raises the rate should not have to restart
/// anything, and a client that obeys it comes back at a sane time.
pub const ZERO_RATE_WAIT: Duration = Duration::from_secs(60 * 60);

/// Slack when comparing token counts. Refill is float arithmetic, so after exactly the right wait
/// a bucket may hold 0.999 999 999 9 of a token; counting that as a whole token keeps a client
/// that waited as told from being refused by rounding. Far below any real rate's resolution
/// (10⁻⁹ of a token is a nanosecond at 1 token/s).
const TOKEN_EPSILON: f64 = 1e-9;

/// How fast a bucket refills and how much it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitPolicy {
    /// Tokens added per second (the sustained rate). Infinite: never limited. Zero: never refills.
    pub rate_per_s: f64,
    /// Most tokens a bucket holds: the most a quiet client may spend at once, and so the most one
    /// request may cost.
    pub burst: u32,
}

impl LimitPolicy {
    /// A policy that never limits (for tests and trusted deployments).
    pub const UNLIMITED: LimitPolicy = LimitPolicy {
        rate_per_s: f64::INFINITY,
        burst: u32::MAX,
    };

    /// Whether this policy never limits (an infinite or NaN rate). Callers that keep buckets in a
    /// map skip it entirely for such a policy.
    pub fn is_unlimited(self) -> bool {
        !self.rate_per_s.is_finite()
    }
}

/// Why [`Bucket::take`] took nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// The bucket holds too few tokens now; it will hold enough after this long (HTTP 429 with
    /// `Retry-After`, or a deferred delivery).
    Wait(Duration),
    /// More tokens than the burst: the bucket can never hold them, so no wait helps (split the
    /// request).
    OverBurst,
}

impl Denied {
    /// The wait to report by a caller that cannot split its request (one token at a time): the
    /// wait, or [`ZERO_RATE_WAIT`] for a bucket that can never hold what was asked.
    pub fn wait(self) -> Duration {
        match self {
            Denied::Wait(wait) => wait,
            Denied::OverBurst => ZERO_RATE_WAIT,
        }
    }
}

/// One key's bucket: `tokens` left at `updated`. Negative tokens are debt ([`Bucket::charge`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens left: at most the burst; below zero only after a [`Bucket::charge`].
    pub tokens: f64,
    /// When `tokens` was computed.
    pub updated: Instant,
}

impl Bucket {
    /// A full bucket at `now`: a key seen for the first time may spend its burst at once.
    pub fn full(policy: LimitPolicy, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(policy.burst),
            updated: now,
        }
    }

    /// The bucket refilled up to `now`, never above the burst. A `now` before `updated` refills
    /// nothing and keeps `updated`.
    pub fn refill(self, policy: LimitPolicy, now: Instant) -> Bucket {
        let burst = f64::from(policy.burst);
        let updated = now.max(self.updated);
        if policy.is_unlimited() {
            return Bucket {
                tokens: burst,
                updated,
            };
        }
        let elapsed_s = now.saturating_duration_since(self.updated).as_secs_f64();
        // A negative rate would drain a bucket as time passes; it means no refill, like zero.
        let tokens = (self.tokens + elapsed_s * policy.rate_per_s.max(0.0)).min(burst);
        Bucket { tokens, updated }
    }

    /// Whole tokens in this (refilled) bucket: how many one-token requests may start now. Zero
    /// when in debt.
    pub fn whole_tokens(self) -> u32 {
        let tokens = self.tokens + TOKEN_EPSILON;
        if tokens < 1.0 {
            0
        } else {
            // Saturating float-to-int cast: tokens never exceed a u32 burst, so this is exact.
            tokens.floor() as u32
        }
    }

    /// How long until this (refilled) bucket holds `n` tokens: zero when it does, `None` when it
    /// never will (`n` above the burst of a policy that limits).
    pub fn until(self, policy: LimitPolicy, n: u32) -> Option<Duration> {
        if policy.is_unlimited() {
            return Some(Duration::ZERO);
        }
        if n > policy.burst {
            return None;
        }
        let missing = f64::from(n) - self.tokens;
        if missing <= TOKEN_EPSILON {
            return Some(Duration::ZERO);
        }
        if policy.rate_per_s > 0.0 {
            // A rate so small that the wait overflows a Duration waits like a zero rate.
            Some(Duration::try_from_secs_f64(missing / policy.rate_per_s).unwrap_or(ZERO_RATE_WAIT))
        } else {
            Some(ZERO_RATE_WAIT)
        }
    }

    /// Takes `n` tokens at `now`, all or nothing. Returns the bucket after the attempt (refilled
    /// to `now`, less `n` when taken) and `Ok(())`, or why nothing was taken.
    pub fn take(self, policy: LimitPolicy, n: u32, now: Instant) -> (Bucket, Result<(), Denied>) {
        let b = self.refill(policy, now);
        if policy.is_unlimited() {
            return (b, Ok(()));
        }
        match b.until(policy, n) {
            Some(Duration::ZERO) => (
                Bucket {
                    tokens: b.tokens - f64::from(n),
                    ..b
                },
                Ok(()),
            ),
            Some(wait) => (b, Err(Denied::Wait(wait))),
            None => (b, Err(Denied::OverBurst)),
        }
    }

    /// Takes `n` tokens at `now` whether or not they are there, going into debt down to
    /// `-debt_max` tokens at most: for work that was already decided and cannot be refused. The
    /// debt refills before the bucket admits anything again, so the rate holds over time; the
    /// bound caps how long one burst of decided work can hold a key back.
    pub fn charge(self, policy: LimitPolicy, n: u32, debt_max: u32, now: Instant) -> Bucket {
        let b = self.refill(policy, now);
        if policy.is_unlimited() {
            return b;
        }
        let floor = -f64::from(debt_max);
        Bucket {
            tokens: (b.tokens - f64::from(n)).max(floor),
            ..b
        }
    }
}

/// Whole seconds for a `Retry-After` header: rounded up and at least 1, so a client that obeys it
/// never arrives before its tokens.
pub fn retry_after_s(wait: Duration) -> u64 {
    let s = wait
        .as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0));
    s.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 tokens a second, 4 at most.
    const POLICY: LimitPolicy = LimitPolicy {
        rate_per_s: 2.0,
        burst: 4,
    };

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    fn bucket(tokens: f64, updated: Instant) -> Bucket {
        Bucket { tokens, updated }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn refill_table() {
        let t0 = Instant::now();
        // (tokens before, ms elapsed, tokens after): 2 a second, never above the burst, debt
        // refills like any shortfall.
        let rows: [(f64, u64, f64); 8] = [
            (0.0, 0, 0.0),
            (0.0, 250, 0.5),
            (0.0, 500, 1.0),
            (1.5, 1_000, 3.5),
            (3.0, 1_000, 4.0),
            (4.0, 60_000, 4.0),
            (-4.0, 1_000, -2.0),
            (-4.0, 10_000, 4.0),
        ];
        for (before, ms, after) in rows {
            let b = bucket(before, t0).refill(POLICY, at(t0, ms));
            assert!(close(b.tokens, after), "{before} +{ms}ms: {}", b.tokens);
            assert_eq!(b.updated, at(t0, ms));
        }
        // A clock that runs backwards refills nothing and keeps the bucket's time.
        let b = bucket(1.0, at(t0, 500)).refill(POLICY, t0);
        assert_eq!(b, bucket(1.0, at(t0, 500)));
        // Zero and negative rates never refill; an infinite rate is always full.
        for rate_per_s in [0.0, -3.0] {
            let p = LimitPolicy {
                rate_per_s,
                burst: 4,
            };
            assert_eq!(bucket(1.0, t0).refill(p, at(t0, 9_000)).tokens, 1.0);
        }
        let p = LimitPolicy {
            rate_per_s: f64::INFINITY,
            burst: 4,
        };
        assert_eq!(bucket(-4.0, t0).refill(p, t0).tokens, 4.0);
        assert_eq!(Bucket::full(POLICY, t0), bucket(4.0, t0));
    }

    #[test]
    fn take_table() {
        let t0 = Instant::now();
        // (tokens before, ms elapsed, n, result, tokens after). All or nothing: a refusal
        // leaves the (refilled) tokens where they were.
        let wait = |ms: u64| Err(Denied::Wait(Duration::from_millis(ms)));
        type Row = (f64, u64, u32, Result<(), Denied>, f64);
        let rows: [Row; 14] = [
            (4.0, 0, 1, Ok(()), 3.0),
            (1.0, 0, 1, Ok(()), 0.0),
            (0.0, 0, 1, wait(500), 0.0),
            (0.5, 0, 1, wait(250), 0.5),
            (0.5, 250, 1, Ok(()), 0.0),
            (-2.0, 0, 1, wait(1_500), -2.0),
            // n at once: exactly what is there passes, one more waits for one more token.
            (3.0, 0, 3, Ok(()), 0.0),
            (3.0, 0, 4, wait(500), 3.0),
            (4.0, 0, 4, Ok(()), 0.0),
            (1.0, 1_000, 3, Ok(()), 0.0),
            (0.0, 0, 4, wait(2_000), 0.0),
            // More than the burst never fits, however full.
            (4.0, 0, 5, Err(Denied::OverBurst), 4.0),
            (0.0, 60_000, 5, Err(Denied::OverBurst), 4.0),
            // A rounding hair short of the token after the right wait still counts.
            (1.0 - 1e-12, 0, 1, Ok(()), -1e-12),
        ];
        for (before, ms, n, result, after) in rows {
            let (b, r) = bucket(before, t0).take(POLICY, n, at(t0, ms));
            assert_eq!(r, result, "{before} +{ms}ms take {n}");
            assert!(close(b.tokens, after), "{before} take {n}: {}", b.tokens);
            assert_eq!(b.updated, at(t0, ms));
        }
    }

    #[test]
    fn take_at_the_policy_edges() {
        let t0 = Instant::now();
        let zero_rate = LimitPolicy {
            rate_per_s: 0.0,
            burst: 1,
        };
        let (_, r) = bucket(0.0, t0).take(zero_rate, 1, at(t0, 60_000));
        assert_eq!(r, Err(Denied::Wait(ZERO_RATE_WAIT)));
        // A rate too small for the wait to fit a Duration waits like a zero rate.
        let tiny_rate = LimitPolicy {
            rate_per_s: 1e-300,
            burst: 1,
        };
        let (_, r) = bucket(0.0, t0).take(tiny_rate, 1, t0);
        assert_eq!(r, Err(Denied::Wait(ZERO_RATE_WAIT)));
        // A zero burst never holds a token; a one-token caller reports the zero-rate wait.
        let zero_burst = LimitPolicy {
            rate_per_s: 5.0,
            burst: 0,
        };
        let (_, r) = Bucket::full(zero_burst, t0).take(zero_burst, 1, at(t0, 9_000));
        assert_eq!(r, Err(Denied::OverBurst));
        assert_eq!(Denied::OverBurst.wait(), ZERO_RATE_WAIT);
        // Unlimited takes anything and stays full.
        let (b, r) = bucket(0.0, t0).take(LimitPolicy::UNLIMITED, u32::MAX, t0);
        assert_eq!(r, Ok(()));
        assert_eq!(b.tokens, f64::from(u32::MAX));
    }

    #[test]
    fn charge_table() {
        let t0 = Instant::now();
        // (tokens before, ms elapsed, charged, debt bound, tokens after, whole tokens after)
        let rows: [(f64, u64, u32, u32, f64, u32); 8] = [
            (4.0, 0, 0, 4, 4.0, 4),
            (4.0, 0, 1, 4, 3.0, 3),
            (4.0, 0, 4, 4, 0.0, 0),
            (3.5, 0, 1, 4, 2.5, 2),
            (1.0, 0, 3, 4, -2.0, 0),
            (0.0, 0, 100, 4, -4.0, 0),
            (0.0, 0, 100, 0, 0.0, 0),
            (0.0, 1_000, 3, 4, -1.0, 0),
        ];
        for (before, ms, n, debt_max, after, whole) in rows {
            let b = bucket(before, t0).charge(POLICY, n, debt_max, at(t0, ms));
            assert!(close(b.tokens, after), "{before} - {n}: {}", b.tokens);
            assert_eq!(b.whole_tokens(), whole, "{before} - {n}");
        }
        // Unlimited is never charged.
        let b = bucket(4.0, t0).charge(LimitPolicy::UNLIMITED, 9, 0, t0);
        assert_eq!(b.tokens, f64::from(u32::MAX));
    }

    #[test]
    fn until_table() {
        let t0 = Instant::now();
        // (tokens, n, wait in ms; None: never)
        let rows: [(f64, u32, Option<u64>); 8] = [
            (4.0, 1, Some(0)),
            (4.0, 4, Some(0)),
            (0.0, 1, Some(500)),
            (0.0, 4, Some(2_000)),
            (1.5, 4, Some(1_250)),
            (-4.0, 1, Some(2_500)),
            (4.0, 5, None),
            (0.0, 0, Some(0)),
        ];
        for (tokens, n, ms) in rows {
            assert_eq!(
                bucket(tokens, t0).until(POLICY, n),
                ms.map(Duration::from_millis),
                "{tokens} until {n}"
            );
        }
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let rows: [(Duration, u64); 6] = [
            (Duration::ZERO, 1),
            (Duration::from_millis(1), 1),
            (Duration::from_millis(1_000), 1),
            (Duration::from_millis(1_001), 2),
            (ZERO_RATE_WAIT, 3_600),
            (Duration::MAX, u64::MAX),
        ];
        for (wait, s) in rows {
            assert_eq!(retry_after_s(wait), s, "{wait:?}");
        }
        // What a refused take says, as a header: 2.5 s becomes 3.
        let t0 = Instant::now();
        let (_, r) = bucket(-4.0, t0).take(POLICY, 1, t0);
        assert_eq!(r.map_err(|d| retry_after_s(d.wait())), Err(3));
    }
}
