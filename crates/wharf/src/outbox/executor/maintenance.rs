//! Housekeeping of one replica: the sweeps (expired unstarted actions; leases lost after a write
//! or on the last attempt), retention, the due gauges and the live table's vacuum, one shot
//! each, and the tasks that run them on their intervals beside `run`'s loop; and the task that
//! keeps the pauses the loop claims under fresh.
//!
//! Owns: when and in what bounded batches each runs, and what each reports. Must not know SQL
//! (the store has it) or anything of claiming and running attempts.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use wharf_core::action::{ActionState, StopReason};

use super::{Executor, SweepReport};
use crate::outbox::error::Error;
use crate::outbox::{metrics, ops};
use crate::store;

impl Executor {
    /// Runs both sweeps once (bounded batches, repeated while a batch comes back full).
    pub async fn sweep_at(&self, now: Option<DateTime<Utc>>) -> Result<SweepReport, Error> {
        let pool = &self.inner.statements;
        let batch = self.inner.config.sweep_batch_max;
        let mut report = SweepReport::default();
        for _ in 0..self.inner.config.drain_rounds_max {
            let lost = store::outbox::sweep_lease_lost(pool, batch, now).await?;
            for (id, kind, reason) in &lost {
                // The statement sets one of two reasons; anything else cannot come back.
                let reason = reason
                    .parse::<StopReason>()
                    .unwrap_or(StopReason::LeaseLostAfterWrite);
                if reason == StopReason::AttemptsExhausted {
                    report.attempts_exhausted += 1;
                } else {
                    report.lease_lost += 1;
                }
                metrics::ended(kind, *id, reason.state(), reason);
            }
            let expired = store::outbox::sweep_expired(pool, batch, now).await?;
            for (id, kind) in &expired {
                metrics::ended(kind, *id, ActionState::Cancelled, StopReason::Expired);
            }
            report.expired += expired.len() as u64;
            if lost.len() < batch as usize && expired.len() < batch as usize {
                break;
            }
        }
        Ok(report)
    }

    /// Retention: deletes actions that ended more than `retention_ms` ago, in bounded batches.
    /// The cutoff comes from this host's clock: a few seconds of skew do not matter against 30
    /// days. Returns how many were deleted.
    pub async fn retain(&self) -> Result<u64, Error> {
        let c = &self.inner.config;
        let cutoff = Utc::now()
            - chrono::Duration::milliseconds(i64::try_from(c.retention_ms).unwrap_or(i64::MAX));
        let mut deleted = 0;
        for _ in 0..c.retention_batches_per_run_max {
            let n = ops::delete_ended_before(&self.inner.statements, cutoff, c.retention_batch_max)
                .await?;
            deleted += n;
            if n < u64::from(c.retention_batch_max) {
                break;
            }
        }
        Ok(deleted)
    }

    /// Refreshes the due-depth and oldest-due-age gauges for every registered kind.
    pub async fn refresh_gauges(&self) -> Result<(), Error> {
        let by_kind: HashMap<String, (i64, f64)> = ops::due(&self.inner.statements)
            .await?
            .into_iter()
            .map(|d| (d.kind, (d.due, d.oldest_due_s)))
            .collect();
        for kind in self.inner.registry.kinds() {
            let (n, age) = by_kind.get(kind).copied().unwrap_or((0, 0.0));
            metrics::due(kind, n, age);
        }
        Ok(())
    }

    /// Vacuums the live table if the dead row versions gathered in it since its last vacuum
    /// reached the threshold ([`ExecutorConfig::vacuum_live`](super::ExecutorConfig)):
    /// `vacuum_dead_rows_min` plus `vacuum_dead_per_mille` of its live rows, beyond what this
    /// executor's last vacuum could not remove. The counts are the
    /// server's statistics, gathered from every replica a second or so late; a vacuum that
    /// another one (an autovacuum, another replica's) holds the table for is skipped, not
    /// waited for. Runs whatever `vacuum_live` says: the setting only decides whether `run`
    /// calls it.
    pub async fn vacuum_if_due(&self) -> Result<LiveVacuum, Error> {
        let c = &self.inner.config;
        let pool = &self.inner.statements;
        let (dead, live, may_vacuum) = store::outbox::live_dead_rows(pool).await?;
        if !may_vacuum {
            return Ok(LiveVacuum::NotAllowed);
        }
        let (dead, live) = (
            u64::try_from(dead).unwrap_or(0),
            u64::try_from(live).unwrap_or(0),
        );
        // What the last vacuum left, unless a vacuum since (another replica's, autovacuum)
        // left less.
        let left = self
            .inner
            .vacuum_dead_left
            .load(Ordering::Relaxed)
            .min(dead);
        self.inner.vacuum_dead_left.store(left, Ordering::Relaxed);
        let threshold = left.saturating_add(c.vacuum_threshold_rows(live));
        if dead < threshold {
            return Ok(LiveVacuum::NotDue {
                dead_rows: dead,
                threshold_rows: threshold,
            });
        }
        let started = Instant::now();
        let mut conn = pool.acquire().await?;
        if let Err(e) = store::outbox::vacuum_live(&mut conn).await {
            // It may have failed between its SET and RESET: that connection goes.
            conn.close_on_drop();
            return Err(e.into());
        }
        let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // The vacuum's own count of what it could not remove is the server's at once.
        let (after, ..) = store::outbox::live_dead_rows(&mut *conn).await?;
        let left_rows = u64::try_from(after).unwrap_or(0);
        self.inner
            .vacuum_dead_left
            .store(left_rows, Ordering::Relaxed);
        Ok(LiveVacuum::Vacuumed {
            dead_rows: dead,
            left_rows,
            took_ms,
        })
    }

    /// [`vacuum_if_due`](Self::vacuum_if_due) every `vacuum_check_interval_ms` until `stop`
    /// turns true, on its own task: on a table of millions of actions a vacuum takes seconds,
    /// which must hold up neither the sweeps nor the claims. Ends at once, with one line that
    /// says so, for a role that may not vacuum the table.
    pub(super) async fn vacuum_when_due(&self, mut stop: watch::Receiver<bool>) {
        let every = Duration::from_millis(self.inner.config.vacuum_check_interval_ms);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = stop.wait_for(|stop| *stop) => return,
                _ = tokio::time::sleep(every) => {}
            }
            match self.vacuum_if_due().await {
                Ok(LiveVacuum::NotAllowed) => {
                    tracing::info!(
                        "this role may not vacuum wharf.action_live (it is not its owner): \
                         the executor leaves vacuuming it to autovacuum"
                    );
                    return;
                }
                Ok(LiveVacuum::Vacuumed {
                    dead_rows,
                    left_rows,
                    took_ms,
                }) => {
                    failing = false;
                    tracing::debug!(dead_rows, left_rows, took_ms, "vacuumed wharf.action_live");
                }
                Ok(LiveVacuum::NotDue { .. }) => failing = false,
                // One warning per outage, as the pauses do.
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "outbox vacuum of the live table failed");
                }
                Err(e) => {
                    tracing::debug!(error = %e, "outbox vacuum of the live table still fails")
                }
            }
        }
    }

    /// Sweeps, retention and gauges on their intervals until `stop` turns true. Beside the
    /// claim loop, so a slow sweep never holds up starting actions.
    pub(super) async fn housekeeping(&self, mut stop: watch::Receiver<bool>) {
        let c = &self.inner.config;
        let interval = |ms: u64| Duration::from_millis(ms);
        let started = Instant::now();
        let (mut next_sweep, mut next_retention, mut next_gauges) = (started, started, started);
        loop {
            let now = Instant::now();
            if now >= next_sweep {
                next_sweep = now + interval(c.sweep_interval_ms);
                if let Err(e) = self.sweep_at(None).await {
                    tracing::warn!(error = %e, "outbox sweep failed");
                }
            }
            if now >= next_retention {
                next_retention = now + interval(c.retention_interval_ms);
                if let Err(e) = self.retain().await {
                    tracing::warn!(error = %e, "outbox retention failed");
                }
            }
            if now >= next_gauges {
                next_gauges = now + interval(c.gauge_interval_ms);
                if let Err(e) = self.refresh_gauges().await {
                    tracing::warn!(error = %e, "outbox gauges failed");
                }
            }
            let next = next_sweep.min(next_retention).min(next_gauges);
            tokio::select! {
                _ = stop.wait_for(|stop| *stop) => return,
                _ = tokio::time::sleep_until(next.into()) => {}
            }
        }
    }

    /// Reads the pauses every [`PAUSE_REFRESH_MS`](crate::outbox::PAUSE_REFRESH_MS) until
    /// `stop` turns true, on its own task: a long sweep must not make a pause late. While the
    /// database does not answer, the last pauses read stay in force (and before the first
    /// read, the loop claims nothing).
    pub(super) async fn watch_pauses(&self, mut stop: watch::Receiver<bool>) {
        let every = Duration::from_millis(crate::outbox::PAUSE_REFRESH_MS);
        let mut failing = false;
        loop {
            match self.refresh_pauses().await {
                Ok(_) => failing = false,
                // One warning per outage, not one a second.
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "outbox pauses cannot be read; the last ones read stay in force");
                }
                Err(e) => tracing::debug!(error = %e, "outbox pauses still cannot be read"),
            }
            tokio::select! {
                _ = stop.wait_for(|stop| *stop) => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
}

/// What one [`Executor::vacuum_if_due`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LiveVacuum {
    /// Fewer dead row versions than the threshold: nothing done.
    NotDue {
        /// Dead row versions counted.
        dead_rows: u64,
        /// What would have started a vacuum.
        threshold_rows: u64,
    },
    /// The vacuum ran, or was skipped at once because another vacuum held the table.
    Vacuumed {
        /// Dead row versions counted before it.
        dead_rows: u64,
        /// Dead row versions counted right after it: those an older snapshot still sees (a
        /// long transaction anywhere on the server) stay until it ends. The next vacuum waits
        /// for the threshold beyond these, so such a transaction cannot make this executor
        /// vacuum every second to no effect.
        left_rows: u64,
        /// How long it took, in milliseconds.
        took_ms: u64,
    },
    /// This role may not vacuum the table (not its owner, nor the database's, nor a
    /// superuser): nothing done.
    NotAllowed,
}
