//! A bench-local `metrics` recorder: every histogram sample and every counter the library
//! records, kept in memory so a benchmark can read the executor's own timings
//! (`wharf_claim_seconds`, `wharf_execution_seconds`) and counts (`wharf_action_ended_total`)
//! without a clock of its own inside the library.
//!
//! Owns: the process's global recorder while `wharf bench` runs (installed once; a process
//! that already has one keeps it, and the bench then reports what it can time itself).
//! Bounded: at most [`SAMPLES_MAX`] samples per histogram; later ones are counted as dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// Samples kept per histogram: 10 M × 8 bytes = 80 MB at most, more than any run here takes.
pub(crate) const SAMPLES_MAX: usize = 10_000_000;

/// One histogram's samples.
#[derive(Debug, Default)]
pub(crate) struct Samples {
    values: Mutex<Vec<f64>>,
    dropped: AtomicU64,
}

impl metrics::HistogramFn for Samples {
    fn record(&self, value: f64) {
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        if values.len() < SAMPLES_MAX {
            values.push(value);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A metric's identity: its name and its labels, sorted.
type MetricKey = (String, Vec<(String, String)>);

/// What the recorder has seen, shared between the recorder and the bench.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Counters by name and sorted labels.
    counters: Mutex<HashMap<MetricKey, Arc<AtomicU64>>>,
    /// Histograms by name (labels folded together: the bench reads a metric as a whole).
    histograms: Mutex<HashMap<String, Arc<Samples>>>,
}

fn labels_of(key: &Key) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = key
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    labels.sort();
    labels
}

impl Seen {
    /// Takes (and clears) every sample of histogram `name` recorded so far, in seconds.
    pub(crate) fn take_samples(&self, name: &str) -> Vec<f64> {
        let histograms = self.histograms.lock().unwrap_or_else(|e| e.into_inner());
        match histograms.get(name) {
            Some(samples) => {
                let mut values = samples.values.lock().unwrap_or_else(|e| e.into_inner());
                std::mem::take(&mut *values)
            }
            None => Vec::new(),
        }
    }

    /// The sum of every counter `name` whose labels include all of `labels`.
    pub(crate) fn counter_sum(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        counters
            .iter()
            .filter(|((n, have), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
            })
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Every counter `name` with its labels and value, for a failure message.
    pub(crate) fn counters_named(&self, name: &str) -> Vec<(Vec<(String, String)>, u64)> {
        let counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<_> = counters
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|((_, labels), c)| (labels.clone(), c.load(Ordering::Relaxed)))
            .collect();
        out.sort();
        out
    }
}

struct BenchRecorder(Arc<Seen>);

impl Recorder for BenchRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.0.counters.lock().unwrap_or_else(|e| e.into_inner());
        let counter = counters
            .entry((key.name().to_owned(), labels_of(key)))
            .or_default()
            .clone();
        Counter::from_arc(counter)
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.0.histograms.lock().unwrap_or_else(|e| e.into_inner());
        let samples = histograms.entry(key.name().to_owned()).or_default().clone();
        Histogram::from_arc(samples)
    }
}

static SEEN: OnceLock<Option<Arc<Seen>>> = OnceLock::new();

/// The recorder's shared state, installing the recorder on first use. `None` when another
/// recorder was installed first (nothing in `wharf bench` does that).
pub(crate) fn seen() -> Option<Arc<Seen>> {
    SEEN.get_or_init(|| {
        let seen = Arc::new(Seen::default());
        metrics::set_global_recorder(BenchRecorder(seen.clone()))
            .ok()
            .map(|()| seen)
    })
    .clone()
}
