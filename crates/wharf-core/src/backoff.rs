//! Retry delays: exponential, capped, with bounded jitter.
//!
//! Pure: the random draw is passed in as `jitter_draw` in `[-1.0, 1.0]`, so a test can pin it.
//! The executor draws it; this module only does arithmetic.

/// How a kind spaces its retries. The defaults are SPEC §2.4's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The delay after the first failed attempt, before jitter.
    pub base_ms: u64,
    /// Growth per attempt. 2 doubles the delay each time.
    pub factor: u32,
    /// No delay exceeds this, jitter included: a retry is never further away than the cap.
    pub cap_ms: u64,
    /// Jitter as a percentage of the delay, both ways (20 ⇒ ±20 %). At most 100.
    pub jitter_percent: u8,
}

impl Default for Backoff {
    /// 2 s, doubling, capped at 15 min, ±20 %: a flapping provider gets room quickly, and
    /// a long outage costs at most four attempts an hour.
    fn default() -> Self {
        Backoff {
            base_ms: 2_000,
            factor: 2,
            cap_ms: 15 * 60 * 1_000,
            jitter_percent: 20,
        }
    }
}

impl Backoff {
    /// The delay before the next attempt, after `attempt` attempts have run (`attempt` ≥ 1).
    ///
    /// `jitter_draw` is clamped to `[-1, 1]`; 0 gives the plain exponential delay.
    pub fn delay_ms(&self, attempt: u32, jitter_draw: f64) -> u64 {
        let exponent = attempt.saturating_sub(1);
        let factor = u64::from(self.factor.max(1));
        let mut plain = self.base_ms.min(self.cap_ms);
        // With a factor of at least 2 the delay reaches the cap within 64 rounds; a factor of 1
        // never grows it, so it skips the loop (which would otherwise run `attempt` times: the
        // property tests found that).
        if factor > 1 {
            for _ in 0..exponent {
                plain = plain.saturating_mul(factor);
                if plain >= self.cap_ms {
                    plain = self.cap_ms;
                    break;
                }
            }
        }
        let draw = if jitter_draw.is_nan() {
            0.0
        } else {
            jitter_draw.clamp(-1.0, 1.0)
        };
        let spread = f64::from(self.jitter_percent.min(100)) / 100.0;
        let jittered = plain as f64 * (1.0 + spread * draw);
        (jittered.max(0.0) as u64).min(self.cap_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_then_cap() {
        let b = Backoff::default();
        let check = |attempt, draw, expected| assert_eq!(b.delay_ms(attempt, draw), expected);
        check(1, 0.0, 2_000);
        check(2, 0.0, 4_000);
        check(3, 0.0, 8_000);
        check(9, 0.0, 512_000);
        check(10, 0.0, 900_000);
        check(1_000, 0.0, 900_000);
        check(u32::MAX, 0.0, 900_000);
    }

    #[test]
    fn jitter_is_bounded_and_never_passes_the_cap() {
        let b = Backoff::default();
        assert_eq!(b.delay_ms(1, 1.0), 2_400);
        assert_eq!(b.delay_ms(1, -1.0), 1_600);
        assert_eq!(b.delay_ms(1, 7.0), 2_400);
        assert_eq!(b.delay_ms(1, f64::NAN), 2_000);
        assert_eq!(b.delay_ms(20, 1.0), 900_000);
        assert_eq!(b.delay_ms(20, -1.0), 720_000);
    }

    #[test]
    fn attempt_zero_is_treated_as_the_first() {
        assert_eq!(Backoff::default().delay_ms(0, 0.0), 2_000);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn backoff() -> impl Strategy<Value = Backoff> {
            (1u64..=1_000_000, 1u32..=10, 0u8..=100, 0u64..=100_000_000).prop_map(
                |(base_ms, factor, jitter_percent, extra)| Backoff {
                    base_ms,
                    factor,
                    cap_ms: base_ms + extra,
                    jitter_percent,
                },
            )
        }

        /// The plain exponential delay, computed independently in floating point: base ·
        /// factor^(attempt-1), capped.
        fn plain(b: &Backoff, attempt: u32) -> f64 {
            let exponent = attempt.saturating_sub(1).min(200) as i32;
            (b.base_ms as f64 * f64::from(b.factor.max(1)).powi(exponent)).min(b.cap_ms as f64)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Never past the cap, jitter included, for any setting, attempt and draw.
            #[test]
            fn bounded_by_the_cap(b in backoff(), attempt in any::<u32>(), draw in -5.0f64..5.0) {
                prop_assert!(b.delay_ms(attempt, draw) <= b.cap_ms);
            }

            /// For one draw, a later attempt never waits less, up to the cap.
            #[test]
            fn monotone_in_the_attempt(b in backoff(), attempt in 1u32..200, draw in -1.0f64..=1.0) {
                prop_assert!(b.delay_ms(attempt, draw) <= b.delay_ms(attempt + 1, draw));
            }

            /// The jitter moves the delay by at most its percentage of the plain delay, both
            /// ways (the cap still wins), and the plain delay is the exponential one.
            #[test]
            fn jitter_within_its_percentage(b in backoff(), attempt in 1u32..80, draw in -1.0f64..=1.0) {
                let p = plain(&b, attempt);
                let spread = f64::from(b.jitter_percent) / 100.0;
                let got = b.delay_ms(attempt, draw) as f64;
                // One millisecond of slack for truncation to whole milliseconds.
                prop_assert!(got >= (p * (1.0 - spread)).floor() - 1.0, "{} < {}", got, p * (1.0 - spread));
                prop_assert!(got <= (p * (1.0 + spread)).min(b.cap_ms as f64) + 1.0);
                let zero = b.delay_ms(attempt, 0.0) as f64;
                prop_assert!((zero - p).abs() <= 1.0 + p * 1e-9, "{} vs {}", zero, p);
            }

            /// The defaults' ±20 %.
            #[test]
            fn default_jitter_is_twenty_percent(attempt in 1u32..12, draw in -1.0f64..=1.0) {
                let b = Backoff::default();
                let p = b.delay_ms(attempt, 0.0) as f64;
                let got = b.delay_ms(attempt, draw) as f64;
                prop_assert!(got >= p * 0.8 - 1.0 && got <= (p * 1.2).min(b.cap_ms as f64) + 1.0);
            }
        }
    }
}
