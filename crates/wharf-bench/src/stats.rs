//! Percentiles, medians and ratios: the arithmetic every benchmark figure goes through.
//!
//! Pure functions over plain numbers (STYLE 1): no clock, no IO. Percentiles use the
//! nearest-rank definition on sorted samples, so a reported p99 is always a sample that was
//! really observed, never an interpolation between two.

use serde::Serialize;

/// Nearest-rank percentile `q` (0.0..=1.0) of ascending `sorted` samples; `None` when empty.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    // Rank ⌈q·n⌉ counted from 1; q = 0 is the smallest sample.
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` (mean of the two middle ones for an even count); `None` when empty.
/// Non-finite values are ignored.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// `a / b`, or `None` when `b` is not a positive finite number.
pub(crate) fn ratio(a: f64, b: f64) -> Option<f64> {
    (b.is_finite() && b > 0.0 && a.is_finite()).then(|| a / b)
}

/// A latency distribution in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub(crate) struct Distribution {
    /// Samples.
    pub(crate) count: u64,
    /// Median.
    pub(crate) p50: Option<f64>,
    /// 90th percentile.
    pub(crate) p90: Option<f64>,
    /// 99th percentile.
    pub(crate) p99: Option<f64>,
    /// 99.9th percentile.
    pub(crate) p999: Option<f64>,
    /// Largest sample.
    pub(crate) max: Option<f64>,
}

impl Distribution {
    /// The distribution of `samples` (any order; non-finite samples are dropped).
    pub(crate) fn of(mut samples: Vec<f64>) -> Distribution {
        samples.retain(|x| x.is_finite());
        samples.sort_by(f64::total_cmp);
        let at = |q| percentile(&samples, q);
        Distribution {
            count: samples.len() as u64,
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: samples.last().copied(),
        }
    }
}

/// Median with the range it came from, for figures reported over several runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Spread {
    /// Median of the runs.
    pub(crate) median: f64,
    /// Smallest run.
    pub(crate) min: f64,
    /// Largest run.
    pub(crate) max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there is no finite value.
    pub(crate) fn of(values: &[f64]) -> Option<Spread> {
        let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        Some(Spread {
            median: median(&finite)?,
            min: finite.iter().copied().fold(f64::INFINITY, f64::min),
            max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        let check = |q: f64, expected: Option<f64>| assert_eq!(percentile(&s, q), expected, "{q}");
        check(0.0, Some(1.0));
        check(0.5, Some(50.0));
        check(0.99, Some(99.0));
        check(0.999, Some(100.0));
        check(1.0, Some(100.0));
        check(2.0, Some(100.0));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
    }

    #[test]
    fn medians_and_ratios() {
        let check = |v: &[f64], expected: Option<f64>| assert_eq!(median(v), expected, "{v:?}");
        check(&[], None);
        check(&[3.0], Some(3.0));
        check(&[3.0, 1.0, 2.0], Some(2.0));
        check(&[4.0, 1.0, 2.0, 3.0], Some(2.5));
        check(&[f64::NAN, 1.0], Some(1.0));
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 2.0), None);
    }

    #[test]
    fn distributions_and_spreads() {
        let d = Distribution::of(vec![5.0, 1.0, 3.0, f64::NAN, 2.0, 4.0]);
        assert_eq!(d.count, 5);
        assert_eq!((d.p50, d.p99, d.max), (Some(3.0), Some(5.0), Some(5.0)));
        let empty = Distribution::of(Vec::new());
        assert_eq!((empty.count, empty.p50), (0, None));
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[]), None);
    }
}
