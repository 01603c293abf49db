//! What a run is worth telling: counts, faults by kind, violations, and two measurements made
//! from the sinks' log — how a lane waits after a fault (leases waited out: issue 11, defects
//! 3 and 8) and how fast work resumes after PostgreSQL came back (defect 9).
//!
//! Owns: the summary and its Markdown form. Must not know: how the run was made.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;

use crate::check;
use crate::run::{FaultKind, Outcome};
use crate::sink::Answer;

/// Run seconds, with a fraction.
fn seconds(us: i64) -> f64 {
    us as f64 / 1e6
}

/// Recovery after one PostgreSQL restart.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    /// Milliseconds from the server answering again to the first provider call.
    pub first_call_ms: Option<f64>,
    /// Provider calls per second in each of the 10 seconds after it answered again.
    pub calls_per_s: Vec<u64>,
    /// Provider calls per second in the 10 seconds before the crash.
    pub before_per_s: f64,
    /// Milliseconds the server was down (stop, wait, crash recovery).
    pub down_ms: f64,
}

/// The summary of a run.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Actions enqueued.
    pub actions: usize,
    /// Actions by final state.
    pub states: BTreeMap<String, usize>,
    /// Actions by stop reason and error code (`state/reason/code`).
    pub reasons: BTreeMap<String, usize>,
    /// Provider calls by answer.
    pub calls: BTreeMap<String, usize>,
    /// Keys that landed more than once, by kind of explanation (`uncertain`, `dedupe`).
    pub duplicates: BTreeMap<String, usize>,
    /// Envelopes sent, and acknowledged by outcome.
    pub envelopes: usize,
    /// Acknowledgements by outcome (last answer per envelope).
    pub envelope_outcomes: BTreeMap<String, usize>,
    /// Faults by kind.
    pub faults: BTreeMap<String, usize>,
    /// Provider faults by kind.
    pub provider_faults: BTreeMap<String, u64>,
    /// Violations by rule.
    pub violations: BTreeMap<String, usize>,
    /// Seconds under faults, and of the final drain.
    pub load_s: f64,
    /// Seconds of the final drain.
    pub drain_s: f64,
    /// Provider calls per second over the load phase.
    pub calls_per_s: f64,
    /// Lane waits of at least half a lease, after a delivered call, for a next action that
    /// was already enqueued: how many, and the longest, in seconds.
    pub lane_waits: (usize, f64),
    /// Lane waits (as above) by the most recent fault begun in the 12 s before the wait
    /// began: count and median seconds.
    pub lane_waits_after: BTreeMap<String, (usize, f64)>,
    /// After each restart.
    pub recoveries: Vec<Recovery>,
    /// Seconds (samples) in which some EXECUTING action's lease had expired, of all samples.
    pub expired_samples: (usize, usize),
    /// The longest an expired lease waited for its reclaim, seen by a sample, seconds; and the
    /// median over the samples that saw one.
    pub expired_for_s: (f64, f64),
    /// The most expired leases waiting at once.
    pub expired_max: i64,
    /// Replicas that exited on their own.
    pub unexpected_exits: Vec<String>,
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Summarises `outcome`.
pub fn summarize(outcome: &Outcome) -> Summary {
    let evidence = &outcome.evidence;
    let mut states = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    for row in &evidence.actions {
        *states.entry(row.state.clone()).or_insert(0) += 1;
        let reason = format!(
            "{}/{}/{}",
            row.state,
            row.stop_reason.as_deref().unwrap_or("-"),
            row.error_code.as_deref().unwrap_or("-")
        );
        *reasons.entry(reason).or_insert(0) += 1;
    }
    let mut calls = BTreeMap::new();
    let mut landed: HashMap<&str, usize> = HashMap::new();
    for effect in &evidence.effects {
        *calls
            .entry(format!("{:?}/{:?}", effect.channel, effect.answer).to_lowercase())
            .or_insert(0) += 1;
        if effect.answer.landed() {
            *landed.entry(effect.key.as_str()).or_insert(0) += 1;
        }
    }
    let rows: HashMap<&str, &str> = evidence
        .actions
        .iter()
        .map(|r| (r.key.as_str(), r.state.as_str()))
        .collect();
    let dedupe: HashMap<&str, bool> = evidence
        .enqueued
        .iter()
        .map(|e| (e.key.as_str(), e.dedupe))
        .collect();
    let mut duplicates = BTreeMap::new();
    for (key, count) in &landed {
        if *count > 1 {
            let why = if dedupe.get(key).copied().unwrap_or(false) {
                "dedupe receiver"
            } else if rows.get(key) == Some(&"UNCERTAIN") {
                "uncertain"
            } else {
                "unexplained"
            };
            *duplicates.entry(why.to_owned()).or_insert(0) += 1;
        }
    }
    let mut envelope_outcomes = BTreeMap::new();
    for envelope in &evidence.sent {
        let outcome = envelope
            .outcome
            .clone()
            .unwrap_or_else(|| "never decided".to_owned());
        *envelope_outcomes.entry(outcome).or_insert(0) += 1;
    }
    let mut faults = BTreeMap::new();
    for fault in &outcome.faults {
        *faults.entry(kind_name(fault.kind).to_owned()).or_insert(0) += 1;
    }
    let load_us = (outcome.load_s * 1e6) as i64;
    let calls_in_load = evidence
        .effects
        .iter()
        .filter(|e| e.started_us <= load_us)
        .count();

    let (lane_waits, lane_waits_after) = lane_waits(outcome);
    Summary {
        actions: evidence.enqueued.len(),
        states,
        reasons,
        calls,
        duplicates,
        envelopes: evidence.sent.len(),
        envelope_outcomes,
        faults,
        provider_faults: outcome.provider_faults.clone(),
        violations: check::by_rule(&outcome.violations),
        load_s: outcome.load_s,
        drain_s: outcome.drain_s,
        calls_per_s: calls_in_load as f64 / outcome.load_s.max(1e-3),
        lane_waits,
        lane_waits_after,
        recoveries: recoveries(outcome),
        expired_samples: (
            outcome.samples.iter().filter(|s| s.expired > 0).count(),
            outcome.samples.len(),
        ),
        expired_for_s: (
            outcome
                .samples
                .iter()
                .map(|s| s.expired_for_ms as f64 / 1e3)
                .fold(0.0, f64::max),
            median(
                outcome
                    .samples
                    .iter()
                    .filter(|s| s.expired > 0)
                    .map(|s| s.expired_for_ms as f64 / 1e3)
                    .collect(),
            ),
        ),
        expired_max: outcome.samples.iter().map(|s| s.expired).max().unwrap_or(0),
        unexpected_exits: outcome.unexpected_exits.clone(),
    }
}

/// The name a fault kind has in reports.
pub fn kind_name(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Kill => "kill -9 + restart",
        FaultKind::Pause => "SIGSTOP past the lease",
        FaultKind::TerminateBackends => "pg_terminate_backend",
        FaultKind::PostgresRestart => "PostgreSQL immediate restart",
        FaultKind::AfterClaim => "a replica dies after a claim (fail point)",
        FaultKind::AfterFence => "a replica dies after a fence (fail point)",
        FaultKind::AfterAnswer => "a replica dies after the provider answered (fail point)",
        FaultKind::NetworkCut => "network cut to the providers (reset)",
        FaultKind::Sigterm => "SIGTERM (graceful stop) + restart",
    }
}

/// Waits of a lane of at least half a lease between a delivered call and the next call of
/// the lane's next action, when that action was enqueued before the call ended (so it was
/// waiting). Attributed to a fault kind when a fault of that kind began in the 12 s before
/// the wait began.
fn lane_waits(outcome: &Outcome) -> ((usize, f64), BTreeMap<String, (usize, f64)>) {
    let evidence = &outcome.evidence;
    let threshold = outcome.settings.lease_ms as i64 * 1_000 / 2;
    let enqueued: HashMap<&str, i64> = evidence
        .enqueued
        .iter()
        .map(|e| (e.key.as_str(), e.enqueued_us))
        .collect();
    let mut by_lane: HashMap<&str, Vec<&crate::sink::Effect>> = HashMap::new();
    for effect in &evidence.effects {
        by_lane
            .entry(effect.lane.as_str())
            .or_default()
            .push(effect);
    }
    let mut waits = Vec::new();
    for calls in by_lane.values_mut() {
        calls.sort_by_key(|e| e.started_us);
        for pair in calls.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.answer != Answer::Delivered || a.key == b.key {
                continue;
            }
            let ready = enqueued.get(b.key.as_str()).copied().unwrap_or(i64::MAX);
            if ready > a.ended_us {
                continue;
            }
            let wait = b.started_us - a.ended_us;
            if wait >= threshold {
                waits.push((a.ended_us, wait));
            }
        }
    }
    let longest = waits.iter().map(|w| w.1).max().unwrap_or(0);
    let mut after: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (began, wait) in &waits {
        // The most recent fault begun in the 12 s before the wait began, if any.
        let recent = outcome
            .faults
            .iter()
            .filter(|f| f.at_us <= *began && *began - f.at_us <= 12_000_000)
            .max_by_key(|f| f.at_us);
        let name = recent.map_or("no fault in the 12 s before", |f| kind_name(f.kind));
        after
            .entry(name.to_owned())
            .or_default()
            .push(seconds(*wait));
    }
    let after = after
        .into_iter()
        .map(|(k, v)| (k, (v.len(), median(v))))
        .collect();
    ((waits.len(), seconds(longest)), after)
}

fn recoveries(outcome: &Outcome) -> Vec<Recovery> {
    let mut starts: Vec<i64> = outcome
        .evidence
        .effects
        .iter()
        .map(|e| e.started_us)
        .collect();
    starts.sort_unstable();
    outcome
        .faults
        .iter()
        .filter(|f| f.kind == FaultKind::PostgresRestart)
        .map(|f| {
            let up = f.over_us;
            let first = starts.partition_point(|&s| s < up);
            let first_call_ms = starts.get(first).map(|&s| (s - up) as f64 / 1e3);
            let calls_per_s = (0..10)
                .map(|second| {
                    let from = up + second * 1_000_000;
                    let to = from + 1_000_000;
                    (starts.partition_point(|&s| s < to) - starts.partition_point(|&s| s < from))
                        as u64
                })
                .collect();
            let from = f.at_us - 10_000_000;
            let before =
                starts.partition_point(|&s| s < f.at_us) - starts.partition_point(|&s| s < from);
            Recovery {
                first_call_ms,
                calls_per_s,
                before_per_s: before as f64 / 10.0,
                down_ms: (f.over_us - f.at_us) as f64 / 1e3,
            }
        })
        .collect()
}

fn table(out: &mut String, title: &str, rows: impl IntoIterator<Item = (String, String)>) {
    let _ = writeln!(out, "| {title} | count |\n|---|---:|");
    for (k, v) in rows {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    out.push('\n');
}

/// The summary as Markdown (what RELIABILITY.md quotes).
pub fn markdown(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Load phase {:.0} s ({:.0} provider calls/s), final drain {:.0} s.\n",
        summary.load_s, summary.calls_per_s, summary.drain_s
    );
    let show = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect::<Vec<_>>()
    };
    table(
        &mut out,
        "faults injected",
        show(&summary.faults).into_iter().chain(
            summary
                .provider_faults
                .iter()
                .map(|(k, v)| (format!("provider {k}"), v.to_string())),
        ),
    );
    table(
        &mut out,
        &format!("actions ({}) by final state", summary.actions),
        show(&summary.states),
    );
    table(
        &mut out,
        "state / stop reason / error code",
        show(&summary.reasons),
    );
    table(&mut out, "provider calls", show(&summary.calls));
    table(
        &mut out,
        "keys that landed twice, explained by",
        show(&summary.duplicates),
    );
    table(
        &mut out,
        &format!("envelopes ({}) by last answer", summary.envelopes),
        show(&summary.envelope_outcomes),
    );
    let violations: usize = summary.violations.values().sum();
    table(
        &mut out,
        &format!("violations ({violations})"),
        show(&summary.violations),
    );
    let _ = writeln!(
        out,
        "Expired leases not yet reclaimed (sampled every second): in {} of {} samples, at most \
         {} at once; the oldest had expired {:.1} s before (median over those samples {:.1} s).\n",
        summary.expired_samples.0,
        summary.expired_samples.1,
        summary.expired_max,
        summary.expired_for_s.0,
        summary.expired_for_s.1
    );
    let _ = writeln!(
        out,
        "Lane waits ≥ half a lease with work ready: {} (longest {:.1} s).\n",
        summary.lane_waits.0, summary.lane_waits.1
    );
    let _ = writeln!(
        out,
        "| lane waits, by the last fault begun ≤ 12 s before | waits | median s |\n|---|---:|---:|"
    );
    for (kind, (n, m)) in &summary.lane_waits_after {
        let _ = writeln!(out, "| {kind} | {n} | {m:.1} |");
    }
    out.push('\n');
    if !summary.recoveries.is_empty() {
        let firsts: Vec<f64> = summary
            .recoveries
            .iter()
            .filter_map(|r| r.first_call_ms)
            .collect();
        let n = summary.recoveries.len() as f64;
        let before: f64 = summary
            .recoveries
            .iter()
            .map(|r| r.before_per_s)
            .sum::<f64>()
            / n;
        let down = median(summary.recoveries.iter().map(|r| r.down_ms).collect());
        let _ = writeln!(
            out,
            "After {} PostgreSQL restarts (down a median {down:.0} ms): first provider call a \
             median {:.0} ms after the server answered again (max {:.0} ms); {before:.0} \
             calls/s in the 10 s before the crash; calls/s in the seconds after (mean over \
             restarts):\n",
            summary.recoveries.len(),
            median(firsts.clone()),
            firsts.iter().copied().fold(0.0, f64::max)
        );
        let _ = writeln!(out, "| second after | calls/s |\n|---:|---:|");
        for second in 0..10 {
            let sum: u64 = summary
                .recoveries
                .iter()
                .map(|r| r.calls_per_s[second])
                .sum();
            let _ = writeln!(out, "| {} | {:.0} |", second + 1, sum as f64 / n);
        }
        out.push('\n');
    }
    if !summary.unexpected_exits.is_empty() {
        let _ = writeln!(
            out,
            "Replicas that exited on their own: {}\n",
            summary.unexpected_exits.join("; ")
        );
    }
    out
}
