//! The executor: claims due actions, runs their adapters, records the results, and keeps the
//! table tidy (sweeps, retention, gauges). Run one per replica; there is no leader.
//!
//! Owns: the claim loop, claim-ahead (actions held for the next free slot), concurrency
//! (overall and per kind), claim budgets (per kind, and the per-tenant caps a claim applies
//! before it locks anything), the call timeout, panic capture, completion batching, wake-ups
//! (NOTIFY hint + polling with backoff), sweeps, retention, `drain`, and graceful shutdown.
//! Fence batching is `fences.rs`. Must not know: any provider, or any SQL text (the store has
//! it). The pure decision of what a result means is [`super::decide`].
//!
//! Invariants kept here:
//! - No provider call runs inside a database transaction: `execute` runs between the claim's
//!   statement and the completion's statement, holding no connection.
//! - Every write after a claim names (id, epoch): completion, release and the fence.
//! - A row is never stranded: an action whose attempt did not finish keeps its lease, and any
//!   executor reclaims it when the lease runs out.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::FutureExt;
use rand::Rng;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use wharf_core::action::{ActionState, StopReason};

use super::attempt::{Attempt, FenceStage};
use super::caps::{Caps, KindCaps};
use super::decide::{Claim, Ran, decide};
use super::error::Error;
use super::fences::Fences;
use super::kind::{ClaimBudget, Registry};
use super::metrics;
use crate::store;
use crate::store::outbox::{ClaimedRow, CompletionRow};

/// Hard ceiling of one claim (SPEC §2.3): bounds the statement's locks and the batch's work.
pub const CLAIM_BATCH_LIMIT: u32 = 100;
/// The NOTIFY channel enqueue signals on.
pub const NOTIFY_CHANNEL: &str = "wharf_action";
/// Times a claim is retried when two replicas raced for one lane (unique violation).
const CLAIM_RACE_RETRIES_MAX: u32 = 3;
/// Times a completion batch is retried on a database error before its leases are left to
/// expire (and the actions to be reclaimed).
const COMPLETE_RETRIES_MAX: u32 = 3;

/// Executor settings. Every limit has its unit last; [`ExecutorConfig::validate`] checks them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExecutorConfig {
    /// Actions one claim statement takes (1..=100). 100 keeps a claim's locks and its
    /// completion batch small while amortising the round trip.
    pub claim_batch_max: u32,
    /// Head candidates one claim looks at. Bounds a claim's cost when many due actions wait
    /// behind busy lanes; must be ≥ `claim_batch_max`.
    pub claim_scan_max: u32,
    /// Attempts running at once in this executor.
    pub concurrency_max: u32,
    /// Attempts of one kind running at once in this executor.
    pub per_kind_concurrency_max: u32,
    /// Claimed actions `run` may hold beyond the running ones (0: none), so that a finished
    /// attempt's slot is refilled at once instead of after a claim statement's commit. A
    /// prefetched action waits at most until a slot of its kind frees; one that waited half of
    /// its lease past the fence margin is given back unrun (no attempt counted), and so are
    /// all of them on shutdown.
    pub claim_ahead_max: u32,
    /// Lease of a claim. Long enough for the slowest attempt plus the fence margin; an attempt
    /// whose executor died is retried after it.
    pub lease_ms: u64,
    /// The fence refuses with less lease than this left (SPEC default 60 s). Every kind's
    /// `call_timeout_ms` must be shorter.
    pub fence_margin_ms: u64,
    /// Shortest idle poll interval (right after work was found).
    pub poll_interval_ms_min: u64,
    /// Longest idle poll interval: the safety net's worst-case latency without NOTIFY.
    pub poll_interval_ms_max: u64,
    /// LISTEN for enqueue's wake-up hint. A hint only: polling still runs. The listener keeps
    /// one connection of the executor's pool for itself while `run` runs.
    pub notify: bool,
    /// On shutdown, how long running attempts may take to finish before they are cut off
    /// (their actions keep their leases and are reclaimed later).
    pub shutdown_grace_ms: u64,
    /// How often the lease and expiry sweeps run.
    pub sweep_interval_ms: u64,
    /// Rows one sweep statement ends.
    pub sweep_batch_max: u32,
    /// How long an ended action is kept (SPEC: 30 days).
    pub retention_ms: u64,
    /// How often retention runs.
    pub retention_interval_ms: u64,
    /// Rows one retention statement deletes.
    pub retention_batch_max: u32,
    /// Retention statements per run: a backlog is worked off over several runs.
    pub retention_batches_per_run_max: u32,
    /// How often the due gauges are refreshed. Their query counts every due row (a scan of
    /// the admitted rows), so keep it at a minute or more on big tables.
    pub gauge_interval_ms: u64,
    /// Results recorded by one completion statement.
    pub completion_batch_max: u32,
    /// `drain` gives up after this many rounds (a round makes everything due and runs it).
    pub drain_rounds_max: u32,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            claim_batch_max: CLAIM_BATCH_LIMIT,
            claim_scan_max: 1_000,
            concurrency_max: 100,
            per_kind_concurrency_max: 100,
            // A third of the concurrency: enough to cover one claim statement's round trip at
            // full speed, small enough that one replica does not hoard work others could run.
            claim_ahead_max: 32,
            // 5 min: an SMTP or HTTP call with its own timeouts fits easily, and a dead
            // replica's actions wait at most this long.
            lease_ms: 5 * 60 * 1_000,
            fence_margin_ms: 60 * 1_000,
            poll_interval_ms_min: 50,
            poll_interval_ms_max: 2_000,
            notify: true,
            shutdown_grace_ms: 30 * 1_000,
            sweep_interval_ms: 1_000,
            sweep_batch_max: 1_000,
            retention_ms: 30 * 24 * 60 * 60 * 1_000,
            retention_interval_ms: 60 * 1_000,
            retention_batch_max: 1_000,
            retention_batches_per_run_max: 100,
            gauge_interval_ms: 60 * 1_000,
            completion_batch_max: CLAIM_BATCH_LIMIT,
            drain_rounds_max: 10_000,
        }
    }
}

impl ExecutorConfig {
    /// Checks every bound, and that every registered kind's call timeout fits in the fence
    /// margin, which must fit in the lease.
    pub fn validate(&self, registry: &Registry) -> Result<(), Error> {
        let fail = |what: String| Err(Error::Config(what));
        if !(1..=CLAIM_BATCH_LIMIT).contains(&self.claim_batch_max) {
            return fail(format!("claim_batch_max must be 1..={CLAIM_BATCH_LIMIT}"));
        }
        if self.claim_scan_max < self.claim_batch_max || self.claim_scan_max > 100_000 {
            return fail("claim_scan_max must be claim_batch_max..=100000".into());
        }
        if self.concurrency_max == 0 || self.per_kind_concurrency_max == 0 {
            return fail("concurrency_max and per_kind_concurrency_max must be ≥ 1".into());
        }
        if self.concurrency_max > 10_000 || self.per_kind_concurrency_max > 10_000 {
            return fail("concurrency limits must be ≤ 10000".into());
        }
        if self.claim_ahead_max > 10_000 {
            return fail("claim_ahead_max must be ≤ 10000".into());
        }
        if self.fence_margin_ms == 0 || self.lease_ms <= self.fence_margin_ms {
            return fail("lease_ms must be longer than fence_margin_ms > 0".into());
        }
        if self.poll_interval_ms_min == 0 || self.poll_interval_ms_max < self.poll_interval_ms_min {
            return fail("poll intervals must satisfy 0 < min ≤ max".into());
        }
        if self.sweep_interval_ms == 0
            || self.retention_interval_ms == 0
            || self.gauge_interval_ms == 0
            || self.sweep_batch_max == 0
            || self.retention_batch_max == 0
            || self.retention_batches_per_run_max == 0
            || self.completion_batch_max == 0
            || self.drain_rounds_max == 0
        {
            return fail("intervals, batch sizes and rounds must be ≥ 1".into());
        }
        for spec in registry.all().map(|r| &r.spec) {
            if spec.call_timeout_ms >= self.fence_margin_ms {
                return fail(format!(
                    "kind {}: call_timeout_ms {} must be shorter than fence_margin_ms {}",
                    spec.name, spec.call_timeout_ms, self.fence_margin_ms
                ));
            }
        }
        Ok(())
    }
}

/// What [`Executor::drain`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DrainReport {
    /// Rounds run.
    pub rounds: u32,
    /// Attempts run (claims taken).
    pub attempts: u64,
    /// False when `drain_rounds_max` ran out before nothing was due.
    pub finished: bool,
}

/// What one sweep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepReport {
    /// Unstarted actions ended CANCELLED / `EXPIRED`.
    pub expired: u64,
    /// Actions whose lease expired after a write started, ended UNCERTAIN /
    /// `LEASE_LOST_AFTER_WRITE`: at-most-once ones, and any whose last attempt it was.
    pub lease_lost: u64,
    /// Actions whose last allowed attempt lost its lease before any write started, ended
    /// FAILED / `ATTEMPTS_EXHAUSTED` (a reclaim would exceed `max_attempts`).
    pub attempts_exhausted: u64,
}

/// One finished attempt, waiting to be recorded.
struct Finished {
    kind: String,
    label: &'static str,
    row: Option<CompletionRow>,
}

/// A claimed action with the permits it runs under.
struct Claimed {
    row: ClaimedRow,
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

/// A claimed action `run` holds until a slot of its kind frees (claim-ahead).
struct Ready {
    row: ClaimedRow,
    /// Taken before the claim statement was sent, so never later than the lease's start.
    claimed: Instant,
}

/// What a claim running beside `run`'s loop reports.
enum ClaimEvent {
    /// Claimed rows, within the allowances they were claimed under.
    Rows(Vec<ClaimedRow>, Instant),
    /// The claim is over. `again`: it came back full or uncovered hidden heads, so more may be
    /// due right now. `empty`: it found nothing (the loop backs off).
    Finished { again: bool, empty: bool },
}

struct Inner {
    pool: PgPool,
    registry: Arc<Registry>,
    config: ExecutorConfig,
    global: Arc<Semaphore>,
    per_kind: HashMap<&'static str, Arc<Semaphore>>,
    /// Wakes the loop to look for work: a NOTIFY arrived or a completion freed a lane.
    wake: Notify,
    /// Wakes the loop to start prefetched actions: an attempt ended and freed its slot.
    freed: Notify,
}

/// Runs actions. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("config", &self.inner.config)
            .field("registry", &self.inner.registry)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor over `pool` for the kinds in `registry`. Checks the configuration.
    pub fn new(
        pool: PgPool,
        registry: Arc<Registry>,
        config: ExecutorConfig,
    ) -> Result<Executor, Error> {
        config.validate(&registry)?;
        let per_kind = registry
            .kinds()
            .map(|k| {
                (
                    k,
                    Arc::new(Semaphore::new(config.per_kind_concurrency_max as usize)),
                )
            })
            .collect();
        Ok(Executor {
            inner: Arc::new(Inner {
                pool,
                global: Arc::new(Semaphore::new(config.concurrency_max as usize)),
                per_kind,
                registry,
                config,
                wake: Notify::new(),
                freed: Notify::new(),
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &ExecutorConfig {
        &self.inner.config
    }

    /// Claims one batch (as many as the free concurrency allows), runs it to completion and
    /// records the results in one statement. Returns how many actions were claimed. `now`
    /// replaces the database clock for the claim, the fence and the completion (tests).
    pub async fn run_once_at(&self, now: Option<DateTime<Utc>>) -> Result<usize, Error> {
        let free =
            (self.inner.global.available_permits() as u32).min(self.inner.config.claim_batch_max);
        let claimed = self.claim(free, now).await?;
        let count = claimed.len();
        let finished =
            futures::future::join_all(claimed.into_iter().map(|c| self.execute(c, now, None)))
                .await;
        self.record(finished, now).await?;
        Ok(count)
    }

    /// [`run_once_at`](Self::run_once_at) on the database clock.
    pub async fn run_once(&self) -> Result<usize, Error> {
        self.run_once_at(None).await
    }

    /// Makes every waiting ADMITTED action due and runs until nothing is due (tests and
    /// `wharf drain`). Runs the sweeps each round, so expired actions end and lost at-most-once
    /// leases are settled. Actions behind a PROPOSED head, and actions another executor holds
    /// under a live lease, are left as they are.
    pub async fn drain(&self) -> Result<DrainReport, Error> {
        self.drain_at(None).await
    }

    /// [`drain`](Self::drain) with `now` replacing the database clock.
    pub async fn drain_at(&self, now: Option<DateTime<Utc>>) -> Result<DrainReport, Error> {
        let mut report = DrainReport::default();
        while report.rounds < self.inner.config.drain_rounds_max {
            report.rounds += 1;
            self.sweep_at(now).await?;
            let moved = store::outbox::make_due(&self.inner.pool, now).await?;
            let mut ran = 0u64;
            // Bounded by the rounds too: each pass either claims something or ends the loop.
            for _ in 0..self.inner.config.drain_rounds_max {
                let n = self.run_once_at(now).await? as u64;
                if n == 0 {
                    break;
                }
                ran += n;
            }
            report.attempts += ran;
            if moved == 0 && ran == 0 {
                report.finished = true;
                break;
            }
        }
        Ok(report)
    }

    /// Runs both sweeps once (bounded batches, repeated while a batch comes back full).
    pub async fn sweep_at(&self, now: Option<DateTime<Utc>>) -> Result<SweepReport, Error> {
        let pool = &self.inner.pool;
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
            let n =
                super::ops::delete_ended_before(&self.inner.pool, cutoff, c.retention_batch_max)
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
        let rows = store::outbox::due_gauges(&self.inner.pool, None).await?;
        let by_kind: HashMap<String, (i64, f64)> =
            rows.into_iter().map(|(k, n, age)| (k, (n, age))).collect();
        for kind in self.inner.registry.kinds() {
            let (n, age) = by_kind.get(kind).copied().unwrap_or((0, 0.0));
            metrics::due(kind, n, age);
        }
        Ok(())
    }

    /// Runs until `shutdown` completes: claims whenever there is room and due work, starts
    /// claimed actions as slots free, records results in batches, and runs the sweeps,
    /// retention and gauges on their intervals beside it.
    ///
    /// Three things keep a fast adapter's actions moving without a statement on the path of
    /// each: claims run beside the loop and hold up to `claim_ahead_max` actions beyond the
    /// running ones, so a freed slot is refilled at once; fences asked together share one
    /// statement (`fences.rs`); results are recorded in batches.
    ///
    /// On shutdown it stops claiming, gives back the actions it holds but has not started (no
    /// attempt counted), lets running attempts finish within `shutdown_grace_ms`, records their
    /// results, and cuts off the rest (their actions keep their leases and are reclaimed later,
    /// by this or another replica).
    ///
    /// Errors of single statements are logged and retried on the next tick; only a failure to
    /// start returns an error.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let inner = &self.inner;
        let c = &inner.config;
        tokio::pin!(shutdown);

        let listener = if c.notify {
            let mut l = PgListener::connect_with(&inner.pool).await?;
            l.listen(NOTIFY_CHANNEL).await?;
            let this = self.clone();
            Some(tokio::spawn(async move { this.listen(l).await }))
        } else {
            None
        };

        let (done_tx, done_rx) = mpsc::channel::<Finished>(c.concurrency_max as usize * 2);
        let recorder = {
            let this = self.clone();
            tokio::spawn(async move { this.record_loop(done_rx).await })
        };
        let (stop_housekeeping, stopped) = watch::channel(false);
        let housekeeping = {
            let this = self.clone();
            tokio::spawn(async move { this.housekeeping(stopped).await })
        };
        let fences = Fences::start(inner.pool.clone(), c.fence_margin_ms);

        let (claim_tx, mut claim_rx) = mpsc::channel::<ClaimEvent>(2);
        let mut claiming = false;
        let mut ready: VecDeque<Ready> = VecDeque::new();
        let mut tasks = JoinSet::new();
        let interval = |ms: u64| Duration::from_millis(ms);
        let mut idle_ms = c.poll_interval_ms_min;
        let hand_max = c.concurrency_max.saturating_add(c.claim_ahead_max);
        let claim_threshold = (c.claim_batch_max.min(hand_max) / 2).max(1);
        let mut last_claim = Instant::now();
        // Why the next claim may find something: a hint arrived (NOTIFY, a lane freed) or the
        // last claim was full. Without one, an empty claim is followed by backing off.
        let mut hinted = true;
        let mut last_empty = false;
        // A short claim is followed by a demotion at most once per short poll interval: at a
        // trickle every claim is short, and a demotion after each would double the statements
        // on the path of the next action without uncovering anything.
        let mut last_demotion: Option<Instant> = None;
        loop {
            while tasks.try_join_next().is_some() {}
            self.dispatch(&mut ready, &mut tasks, &done_tx, &fences)
                .await;

            let running = c.concurrency_max - inner.global.available_permits() as u32;
            let in_hand = running + ready.len() as u32;
            let want = hand_max.saturating_sub(in_hand).min(c.claim_batch_max);
            let worth_it = if !ready.is_empty() {
                // Work is in hand: refill only by a worthwhile batch. Many small claims cost a
                // statement each, and on a busy server statements are what slows every
                // attempt down.
                want >= claim_threshold
            } else if last_empty {
                hinted || last_claim.elapsed() >= interval(idle_ms)
            } else {
                hinted
                    || want >= claim_threshold
                    || in_hand == 0
                    || last_claim.elapsed() >= interval(c.poll_interval_ms_min)
            };
            if !claiming && want > 0 && worth_it {
                let (allowances, caps) = self.allowances(want, |kind| {
                    let running = inner.per_kind.get(kind).map_or(0, |s| {
                        c.per_kind_concurrency_max - s.available_permits() as u32
                    });
                    let waiting = ready.iter().filter(|r| r.row.kind == kind).count() as u32;
                    (c.per_kind_concurrency_max + c.claim_ahead_max)
                        .saturating_sub(running + waiting)
                });
                if !allowances.is_empty() {
                    claiming = true;
                    hinted = false;
                    last_claim = Instant::now();
                    let may_demote = last_demotion
                        .is_none_or(|at| at.elapsed() >= interval(c.poll_interval_ms_min));
                    if may_demote {
                        last_demotion = Some(last_claim);
                    }
                    let (this, tx) = (self.clone(), claim_tx.clone());
                    tokio::spawn(async move {
                        // An adapter's `claimed` runs inside; a panic there must not leave the
                        // loop waiting for a claim that never finishes.
                        let claim =
                            this.claim_beside(want, allowances, caps, may_demote, tx.clone());
                        if AssertUnwindSafe(claim).catch_unwind().await.is_err() {
                            tracing::error!(
                                "outbox claim panicked; its actions come back when their leases expire"
                            );
                            let _ = tx
                                .send(ClaimEvent::Finished {
                                    again: false,
                                    empty: true,
                                })
                                .await;
                        }
                    });
                }
            }

            let sleep_ms = if in_hand > 0 {
                c.poll_interval_ms_min
            } else {
                idle_ms
            };
            tokio::select! {
                _ = &mut shutdown => break,
                _ = inner.wake.notified() => hinted = true,
                _ = inner.freed.notified() => {}
                Some(event) = claim_rx.recv() => match event {
                    ClaimEvent::Rows(rows, claimed) => {
                        ready.extend(rows.into_iter().map(|row| Ready { row, claimed }));
                    }
                    ClaimEvent::Finished { again, empty } => {
                        claiming = false;
                        hinted |= again;
                        last_empty = empty;
                        idle_ms = if empty {
                            (idle_ms * 2).min(c.poll_interval_ms_max)
                        } else {
                            c.poll_interval_ms_min
                        };
                    }
                },
                _ = tokio::time::sleep(interval(sleep_ms)) => {}
            }
        }

        // Stop claiming: take in the claim in flight, then give back what has not started, so
        // another replica can run it now rather than after the lease.
        while claiming {
            match claim_rx.recv().await {
                Some(ClaimEvent::Rows(rows, claimed)) => {
                    ready.extend(rows.into_iter().map(|row| Ready { row, claimed }));
                }
                Some(ClaimEvent::Finished { .. }) | None => claiming = false,
            }
        }
        self.give_back(ready.drain(..).map(|r| (r.row.id, r.row.epoch)).collect())
            .await;
        let _ = stop_housekeeping.send(true);

        // Give running attempts their grace period.
        let grace = interval(c.shutdown_grace_ms);
        let finished_in_time =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} })
                .await
                .is_ok();
        if !finished_in_time {
            tracing::warn!(
                running = tasks.len(),
                "outbox shutdown grace ran out; cut-off actions keep their leases and will be reclaimed"
            );
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        drop(done_tx);
        drop(fences);
        let _ = recorder.await;
        let _ = housekeeping.await;
        if let Some(listener) = listener {
            listener.abort();
        }
        Ok(())
    }

    /// Starts held actions while slots are free (a global and a per-kind permit each), oldest
    /// claim first, skipping kinds whose slots are full; gives back those that waited so long
    /// that their fence might refuse.
    async fn dispatch(
        &self,
        ready: &mut VecDeque<Ready>,
        tasks: &mut JoinSet<()>,
        done: &mpsc::Sender<Finished>,
        fences: &Fences,
    ) {
        let c = &self.inner.config;
        // Half of what the lease leaves beyond the fence margin: the fence needs the margin
        // left, and the lease started after `claimed` (database clock, same second).
        let wait_max = Duration::from_millis((c.lease_ms - c.fence_margin_ms) / 2);
        let mut stale = Vec::new();
        ready.retain(|r| {
            let fresh = r.claimed.elapsed() < wait_max;
            if !fresh {
                stale.push((r.row.id, r.row.epoch));
            }
            fresh
        });
        let mut i = 0;
        while i < ready.len() && self.inner.global.available_permits() > 0 {
            let Some(permits) = self.permits(&ready[i].row.kind) else {
                i += 1;
                continue;
            };
            let Some(Ready { row, .. }) = ready.remove(i) else {
                break;
            };
            let claimed = Claimed {
                row,
                _permits: permits,
            };
            let (this, tx, fences) = (self.clone(), done.clone(), fences.clone());
            tasks.spawn(async move {
                let finished = this.execute(claimed, None, Some(fences)).await;
                // The permits went with `claimed`: a held action can start now.
                this.inner.freed.notify_one();
                // The recorder only stops after every sender is gone.
                let _ = tx.send(finished).await;
            });
        }
        if !stale.is_empty() {
            tracing::info!(
                count = stale.len(),
                "outbox gives back claimed actions that waited too long for a slot"
            );
            self.give_back(stale).await;
        }
    }

    /// One claim for `run`, beside its loop: the rows go to the loop as soon as the claim
    /// statement answers; a short claim is then followed by a demotion (if `may_demote`), and
    /// the loop is told whether to look again at once.
    async fn claim_beside(
        &self,
        want: u32,
        mut allowances: HashMap<&'static str, u32>,
        caps: Caps,
        may_demote: bool,
        tx: mpsc::Sender<ClaimEvent>,
    ) {
        let started = Instant::now();
        let got = match self.claim_within(want, None, &mut allowances, &caps).await {
            Ok(rows) => {
                metrics::claim_took(started.elapsed());
                let got = rows.len() as u32;
                if got > 0 {
                    let _ = tx.send(ClaimEvent::Rows(rows, started)).await;
                }
                got
            }
            Err(e) => {
                tracing::warn!(error = %e, "outbox claim failed");
                let _ = tx
                    .send(ClaimEvent::Finished {
                        again: false,
                        empty: true,
                    })
                    .await;
                return;
            }
        };
        let mut again = got == want;
        if !again && may_demote {
            // Short: take the hint off rows that wait behind an earlier action of their lane;
            // if that uncovered anything, the loop looks again now.
            match store::outbox::demote(&self.inner.pool, self.inner.config.claim_scan_max, None)
                .await
            {
                Ok(n) => again = n > 0,
                Err(e) => tracing::warn!(error = %e, "outbox demotion failed"),
            }
        }
        let _ = tx
            .send(ClaimEvent::Finished {
                again,
                empty: got == 0 && !again,
            })
            .await;
    }

    /// Sweeps, retention and gauges on their intervals until `stop` turns true. Beside the
    /// claim loop, so a slow sweep never holds up starting actions.
    async fn housekeeping(&self, mut stop: watch::Receiver<bool>) {
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

    async fn listen(&self, mut listener: PgListener) {
        loop {
            match listener.recv().await {
                Ok(_) => self.inner.wake.notify_one(),
                Err(e) => {
                    // sqlx reconnects on the next recv; polling covers the gap.
                    tracing::debug!(error = %e, "outbox NOTIFY listener lost its connection");
                    tokio::time::sleep(Duration::from_millis(
                        self.inner.config.poll_interval_ms_max,
                    ))
                    .await;
                }
            }
        }
    }

    async fn record_loop(&self, mut rx: mpsc::Receiver<Finished>) {
        let max = self.inner.config.completion_batch_max as usize;
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < max {
                match rx.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(_) => break,
                }
            }
            if let Err(e) = self.record(batch, None).await {
                tracing::error!(error = %e, "outbox could not record results; their leases will expire and they will be claimed again");
            }
            // A completion may have freed a lane: look for its next action now.
            self.inner.wake.notify_one();
        }
    }

    /// The kinds this executor may claim now, each with how many it may take, and the
    /// per-tenant caps of the kinds that answered [`ClaimBudget::PerTenant`] (only caps that
    /// can bind a claim of `want`; see [`KindCaps::new`]). `room` says how many actions of a
    /// kind this executor can take on now.
    fn allowances(
        &self,
        want: u32,
        room: impl Fn(&str) -> u32,
    ) -> (HashMap<&'static str, u32>, Caps) {
        let inner = &self.inner;
        let mut kinds = HashMap::new();
        let mut caps = Caps::default();
        for r in inner.registry.all() {
            if !inner.per_kind.contains_key(r.spec.name) {
                continue;
            }
            let permits = room(r.spec.name);
            let (budget, per_tenant) = match r.adapter.claim_budget() {
                ClaimBudget::Unlimited => (u32::MAX, None),
                ClaimBudget::AtMost(n) => (n, None),
                ClaimBudget::PerTenant {
                    total,
                    others,
                    tenants,
                } => (total, Some((others, tenants))),
            };
            let mut allowed = permits.min(budget);
            if let Some((others, tenants)) = per_tenant
                && allowed > 0
                && let Some(kind_caps) = KindCaps::new(others, tenants, allowed.min(want))
            {
                if kind_caps.allows_any() {
                    caps.kinds.insert(r.spec.name, kind_caps);
                } else {
                    allowed = 0;
                }
            }
            if allowed > 0 {
                kinds.insert(r.spec.name, allowed);
            }
        }
        (kinds, caps)
    }

    /// A global and a per-kind permit for one attempt of `kind`, if both are free.
    fn permits(&self, kind: &str) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let kind_sem = self.inner.per_kind.get(kind)?;
        let global = self.inner.global.clone().try_acquire_owned().ok()?;
        let kind = kind_sem.clone().try_acquire_owned().ok()?;
        Some((global, kind))
    }

    /// Claims up to `want` actions for [`run_once_at`](Self::run_once_at), each with its
    /// permits; a short claim is followed by a demotion and, if that uncovered anything, a
    /// second look.
    async fn claim(&self, want: u32, now: Option<DateTime<Utc>>) -> Result<Vec<Claimed>, Error> {
        if want == 0 {
            return Ok(Vec::new());
        }
        let inner = &self.inner;
        let (mut allowances, mut caps) = self.allowances(want, |kind| {
            inner
                .per_kind
                .get(kind)
                .map_or(0, |s| s.available_permits() as u32)
        });
        let started = Instant::now();
        let mut rows = self.claim_within(want, now, &mut allowances, &caps).await?;
        // From here on the rows above are EXECUTING under our lease: an error of a later
        // statement must not drop them (they would sit until the lease expires). Log it and run
        // what was claimed.
        if (rows.len() as u32) < want {
            match store::outbox::demote(&inner.pool, inner.config.claim_scan_max, now).await {
                Ok(0) => {}
                Ok(_) => {
                    // The second look must not give a tenant its cap a second time.
                    caps.spend(&rows);
                    match self
                        .claim_within(want - rows.len() as u32, now, &mut allowances, &caps)
                        .await
                    {
                        Ok(more) => rows.extend(more),
                        Err(e) => tracing::warn!(
                            error = %e,
                            "outbox second claim failed; running the actions already claimed"
                        ),
                    }
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "outbox demotion failed; running the actions already claimed"
                ),
            }
        }
        metrics::claim_took(started.elapsed());
        let mut claimed = Vec::with_capacity(rows.len());
        let mut back = Vec::new();
        for row in rows {
            match self.permits(&row.kind) {
                Some(permits) => claimed.push(Claimed {
                    row,
                    _permits: permits,
                }),
                None => back.push((row.id, row.epoch)),
            }
        }
        self.give_back(back).await;
        Ok(claimed)
    }

    /// One claim (two statements when a race with another replica is retried) for up to
    /// `want` actions of the allowed kinds. Keeps what fits each kind's allowance (and counts
    /// it off), gives the rest back at once without counting an attempt, and tells each kind's
    /// adapter the tenants of what it kept ([`Adapter::claimed`](super::Adapter::claimed)),
    /// before any of them runs, so a budget is spent at the claim and the next claim sees it
    /// spent.
    async fn claim_within(
        &self,
        want: u32,
        now: Option<DateTime<Utc>>,
        allowances: &mut HashMap<&'static str, u32>,
        caps: &Caps,
    ) -> Result<Vec<ClaimedRow>, Error> {
        let kinds: Vec<&str> = allowances
            .iter()
            .filter(|(_, left)| **left > 0)
            .map(|(kind, _)| *kind)
            .collect();
        // Never ask for more than the kinds could take: what comes back beyond an allowance
        // is given back, which costs a statement and two row versions each.
        let want = want.min(
            allowances
                .values()
                .fold(0u32, |sum, n| sum.saturating_add(*n)),
        );
        if want == 0 || kinds.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.claim_rows(want, now, &kinds, caps).await?;
        let mut kept = Vec::with_capacity(rows.len());
        let mut back = Vec::new();
        for row in rows {
            match allowances.get_mut(row.kind.as_str()) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    kept.push(row);
                }
                _ => back.push((row.id, row.epoch)),
            }
        }
        self.tell_claimed(&kept);
        self.give_back(back).await;
        Ok(kept)
    }

    /// Gives claimed actions back unrun: ADMITTED again, due now, no attempt counted (fenced
    /// by (id, epoch)). A failure is logged, never returned: the actions come back when their
    /// leases run out.
    async fn give_back(&self, rows: Vec<(i64, i64)>) {
        if rows.is_empty() {
            return;
        }
        let (ids, epochs): (Vec<i64>, Vec<i64>) = rows.into_iter().unzip();
        let released = match store::outbox::release(&self.inner.pool, &ids, &epochs).await {
            Ok(released) => released,
            Err(e) => {
                tracing::warn!(error = %e, "outbox release failed; the actions wait for their leases to expire");
                return;
            }
        };
        if released.len() < ids.len() {
            // Not an error: a row missing here was erased meanwhile (fenced by epoch, nothing
            // else can have touched it). Its lease, if it still exists, brings it back.
            let lost: Vec<i64> = ids
                .iter()
                .copied()
                .filter(|id| !released.contains(id))
                .collect();
            tracing::warn!(ids = ?lost, "outbox could not release claimed actions; they wait for their leases to expire");
        }
    }

    /// Tells each kind's adapter the tenants of the actions it is about to run.
    fn tell_claimed(&self, rows: &[ClaimedRow]) {
        let mut by_kind: BTreeMap<&str, Vec<Option<&str>>> = BTreeMap::new();
        for row in rows {
            by_kind
                .entry(row.kind.as_str())
                .or_default()
                .push(row.tenant_id.as_deref());
        }
        for (kind, tenants) in by_kind {
            if let Some(registered) = self.inner.registry.get(kind) {
                registered.adapter.claimed(&tenants);
            }
        }
    }

    async fn claim_rows(
        &self,
        want: u32,
        now: Option<DateTime<Utc>>,
        kinds: &[&str],
        caps: &Caps,
    ) -> Result<Vec<ClaimedRow>, Error> {
        let c = &self.inner.config;
        // The capped statement only while some kind has caps that can bind: it probes every
        // scanned candidate, where the plain one stops at the first `want` heads.
        let tenant_caps = (!caps.kinds.is_empty()).then(|| caps.to_store());
        let mut tries = 0;
        loop {
            let claimed = match &tenant_caps {
                None => {
                    store::outbox::claim(
                        &self.inner.pool,
                        want,
                        c.lease_ms,
                        now,
                        kinds,
                        c.claim_scan_max,
                    )
                    .await
                }
                Some(tenant_caps) => {
                    store::outbox::claim_capped(
                        &self.inner.pool,
                        want,
                        c.lease_ms,
                        now,
                        kinds,
                        c.claim_scan_max,
                        tenant_caps,
                    )
                    .await
                }
            };
            match claimed {
                Ok(rows) => return Ok(rows),
                // Two replicas took heads of one lane at the same moment; the unique index let
                // one win. The loser's statement changed nothing: look again.
                Err(sqlx::Error::Database(e))
                    if e.is_unique_violation() && tries < CLAIM_RACE_RETRIES_MAX =>
                {
                    tries += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Runs one claimed action's adapter under the call timeout, catching a panic, and decides
    /// the result. Holds no connection while the adapter runs.
    async fn execute(
        &self,
        claimed: Claimed,
        now: Option<DateTime<Utc>>,
        fences: Option<Fences>,
    ) -> Finished {
        let inner = &self.inner;
        let row = claimed.row;
        let Some(registered) = inner.registry.get(&row.kind) else {
            // Unreachable: claims name registered kinds only. Recording nothing keeps the row
            // for an executor that knows the kind.
            return Finished {
                kind: row.kind,
                label: "abandoned",
                row: None,
            };
        };
        let spec = &registered.spec;
        let call_timeout = Duration::from_millis(spec.call_timeout_ms);
        let claim = Claim {
            id: row.id,
            epoch: row.epoch,
            attempt: u32::try_from(row.attempt).unwrap_or(u32::MAX),
            max_attempts: u32::try_from(row.max_attempts).unwrap_or(1),
        };
        let mut attempt = Attempt {
            action_id: row.id,
            kind: row.kind.clone(),
            tenant_id: row.tenant_id,
            project_id: row.project_id,
            lane_key: row.lane_key,
            idempotency_key: row.idempotency_key,
            payload: row.payload.unwrap_or(serde_json::Value::Null),
            subject_account_id: row.subject_account_id,
            attempt: claim.attempt,
            max_attempts: claim.max_attempts,
            epoch: row.epoch,
            write_started: row.write_started,
            pool: inner.pool.clone(),
            call_timeout,
            fence_margin_ms: inner.config.fence_margin_ms,
            now,
            fence: FenceStage::NotStarted,
            fences,
        };
        let started = Instant::now();
        let call = AssertUnwindSafe(registered.adapter.execute(&mut attempt)).catch_unwind();
        let ran = match tokio::time::timeout(call_timeout, call).await {
            Ok(Ok(outcome)) => Ran::Returned(outcome),
            Ok(Err(_panic)) => Ran::Panicked,
            Err(_elapsed) => Ran::TimedOut,
        };
        metrics::execution_took(&row.kind, started.elapsed());
        let jitter = rand::thread_rng().gen_range(-1.0..=1.0);
        let decided = decide(claim, &ran, attempt.fence, &spec.backoff, jitter);
        Finished {
            kind: row.kind,
            label: ran.label(),
            row: decided,
        }
    }

    /// Records finished attempts in one statement, fenced by (id, epoch), and counts them.
    async fn record(
        &self,
        finished: Vec<Finished>,
        now: Option<DateTime<Utc>>,
    ) -> Result<(), Error> {
        let rows: Vec<CompletionRow> = finished.iter().filter_map(|f| f.row.clone()).collect();
        let mut recorded: HashSet<i64> = HashSet::new();
        if !rows.is_empty() {
            let mut tries = 0;
            loop {
                match store::outbox::complete(&self.inner.pool, &rows, now).await {
                    Ok(ids) => {
                        recorded.extend(ids);
                        break;
                    }
                    Err(e) if tries < COMPLETE_RETRIES_MAX => {
                        tries += 1;
                        tracing::warn!(error = %e, tries, "outbox completion failed; retrying");
                        tokio::time::sleep(Duration::from_millis(50 << tries)).await;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for f in &finished {
            let Some(row) = &f.row else {
                metrics::attempt(&f.kind, f.label, false);
                continue;
            };
            let was_recorded = recorded.contains(&row.id);
            metrics::attempt(&f.kind, f.label, was_recorded);
            if !was_recorded {
                tracing::info!(action_id = row.id, epoch = row.epoch, kind = %f.kind,
                    "attempt result dropped: the claim was superseded or the action erased");
                continue;
            }
            if let Some(reason) = row.stop_reason.and_then(|r| r.parse::<StopReason>().ok()) {
                metrics::ended(&f.kind, row.id, reason.state(), reason);
            }
        }
        Ok(())
    }
}
