//! The outbox's metric names and the one place that records them (SPEC §2.6), through the
//! `metrics` facade; the binary chooses the exporter.
//!
//! Owns: names, labels, and the warning line per UNCERTAIN end. Must not know: SQL or adapters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wharf_core::action::{ActionState, StopReason};

/// Counter: attempts, by `kind`, `result` (done, retry, defer, uncertain, failed, cancelled,
/// abandoned, panic, timeout) and `recorded` (false when the claim was lost and nothing was
/// written).
pub const ATTEMPTS_TOTAL: &str = "wharf_action_attempts_total";
/// Counter: ended actions, by `kind`, `state` and `reason` (the stop reason).
pub const ENDED_TOTAL: &str = "wharf_action_ended_total";
/// Gauge: due ADMITTED actions, by `kind`.
pub const DUE_DEPTH: &str = "wharf_action_due_depth";
/// Gauge: age in seconds of the oldest due ADMITTED action, by `kind` (0 when none is due).
pub const OLDEST_DUE_AGE_SECONDS: &str = "wharf_action_oldest_due_age_seconds";
/// Counter: claimed actions given back unrun (no attempt counted): beyond a kind's allowance,
/// held too long or at shutdown, or after a fence that could not reach the database.
pub const GIVEN_BACK_TOTAL: &str = "wharf_action_given_back_total";
/// Gauge: 1 while a pause is in force, by `kind` and `tenant` ("*" for a kind-wide pause);
/// 0 once this replica saw it resumed.
pub const KIND_PAUSED: &str = "wharf_kind_paused";
/// Histogram: seconds per claim statement.
pub const CLAIM_SECONDS: &str = "wharf_claim_seconds";
/// Histogram: seconds per `execute` call, by `kind`.
pub const EXECUTION_SECONDS: &str = "wharf_execution_seconds";

pub(crate) fn attempt(kind: &str, result: &'static str, recorded: bool) {
    metrics::counter!(
        ATTEMPTS_TOTAL,
        "kind" => kind.to_owned(),
        "result" => result,
        "recorded" => if recorded { "true" } else { "false" }
    )
    .increment(1);
}

/// Attempt log lines per second at most; past that, one line a second says how many were left
/// out (a failing provider must not flood the log).
pub const ATTEMPT_LOG_LINES_PER_SECOND_MAX: u64 = 50;

/// The second the budget below is for, and lines logged / left out in it.
static LOG_SECOND: AtomicU64 = AtomicU64::new(0);
static LOG_USED: AtomicU64 = AtomicU64::new(0);
static LOG_LEFT_OUT: AtomicU64 = AtomicU64::new(0);

/// One info line per attempt that did not end DONE (retry, defer, uncertain, failed, cancelled,
/// abandoned, panic, timeout): kind, action id, attempt, result, error code, and whether it was
/// recorded (given back counts as recorded). No payload, no provider text. Rate-limited to
/// [`ATTEMPT_LOG_LINES_PER_SECOND_MAX`].
pub(crate) fn attempt_logged(
    kind: &str,
    action_id: i64,
    attempt: u32,
    result: &'static str,
    error_code: Option<&str>,
    recorded: bool,
) {
    if result == "done" {
        return;
    }
    let second = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LOG_SECOND.swap(second, Ordering::Relaxed) != second {
        let left_out = LOG_LEFT_OUT.swap(0, Ordering::Relaxed);
        LOG_USED.store(0, Ordering::Relaxed);
        if left_out > 0 {
            tracing::info!(left_out, "attempt log lines left out in the last second");
        }
    }
    if LOG_USED.fetch_add(1, Ordering::Relaxed) >= ATTEMPT_LOG_LINES_PER_SECOND_MAX {
        LOG_LEFT_OUT.fetch_add(1, Ordering::Relaxed);
        return;
    }
    tracing::info!(
        kind,
        action_id,
        attempt,
        result,
        error_code = error_code.unwrap_or(""),
        recorded,
        "attempt ended"
    );
}

/// One ended action: the counter, and for UNCERTAIN the one warning line (kind and reason only:
/// no payload, no provider text).
pub(crate) fn ended(kind: &str, id: i64, state: ActionState, reason: StopReason) {
    metrics::counter!(
        ENDED_TOTAL,
        "kind" => kind.to_owned(),
        "state" => state.as_str(),
        "reason" => reason.as_str()
    )
    .increment(1);
    if state == ActionState::Uncertain {
        tracing::warn!(
            action_id = id,
            kind,
            reason = reason.as_str(),
            "action ended UNCERTAIN"
        );
    }
}

pub(crate) fn given_back(count: usize) {
    metrics::counter!(GIVEN_BACK_TOTAL).increment(count as u64);
}

pub(crate) fn claim_took(took: Duration) {
    metrics::histogram!(CLAIM_SECONDS).record(took.as_secs_f64());
}

pub(crate) fn execution_took(kind: &str, took: Duration) {
    metrics::histogram!(EXECUTION_SECONDS, "kind" => kind.to_owned()).record(took.as_secs_f64());
}

pub(crate) fn due(kind: &str, depth: i64, oldest_s: f64) {
    metrics::gauge!(DUE_DEPTH, "kind" => kind.to_owned()).set(depth as f64);
    metrics::gauge!(OLDEST_DUE_AGE_SECONDS, "kind" => kind.to_owned()).set(oldest_s.max(0.0));
}

pub(crate) fn paused(kind: &str, tenant: Option<&str>, on: bool) {
    metrics::gauge!(
        KIND_PAUSED,
        "kind" => kind.to_owned(),
        "tenant" => tenant.unwrap_or("*").to_owned()
    )
    .set(if on { 1.0 } else { 0.0 });
}
