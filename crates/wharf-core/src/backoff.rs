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
        let mut plain = self.base_ms.min(self.cap_ms);
        for _ in 0..exponent {
            plain = plain.saturating_mul(u64::from(self.factor.max(1)));
            if plain >= self.cap_ms {
                plain = self.cap_ms;
                break;
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
}
