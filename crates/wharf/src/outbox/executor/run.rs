//! [`Executor::run`]: the long-running loop of one replica.
//!
//! Owns: claiming beside the loop and holding claimed actions for the next free slot
//! (claim-ahead), starting them as slots free, giving back what was held on shutdown or for too
//! long, the NOTIFY listener, the completion recorder task, and starting the housekeeping task
//! (`maintenance.rs`). Must not know SQL (the store has it) or how one attempt is run and
//! decided (`execute` and `record` in the parent module).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use sqlx::postgres::PgListener;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use super::{Claimed, Executor, Finished, GiveBack, NOTIFY_CHANNEL};
use crate::outbox::caps::Caps;
use crate::outbox::error::Error;
use crate::outbox::fences::Fences;
use crate::outbox::kind::ClaimBudget;
use crate::outbox::metrics;
use crate::store;
use crate::store::outbox::ClaimedRow;

/// A claimed action `run` holds until a slot of its kind frees (claim-ahead).
struct Ready {
    row: ClaimedRow,
    /// Taken before the claim statement was sent, so never later than the lease's start.
    claimed: Instant,
}

/// What a claim running beside `run`'s loop reports.
enum ClaimEvent {
    /// Claimed rows, within the allowances they were claimed under, and the instant read
    /// before the claim statement was sent.
    Rows(Vec<ClaimedRow>, Instant),
    /// The claim is over: what it was sent for, and how it went.
    Finished(Sent, ClaimEnd),
}

/// What one claim was sent for: counted as in hand until it finishes.
struct Sent {
    want: u32,
    allowances: HashMap<&'static str, u32>,
}

/// How a claim beside the loop ended.
enum ClaimEnd {
    /// `again`: it came back full or uncovered hidden heads, so more may be due right now.
    /// `empty`: it found nothing (the loop backs off). `full`: it took all it asked for.
    /// `found`: it took at least one action.
    Done {
        again: bool,
        empty: bool,
        full: bool,
        found: bool,
    },
    /// The statement failed (logged); the loop retries after a short, growing wait.
    Failed,
}

/// After a claim that found work, the next claim goes out at most this long after it: enqueues
/// that committed just after the claim's snapshot were covered by a wake-up another enqueue
/// sent (enqueue.sql sends at most two at a time), so they are picked up here, not at the next
/// poll.
const TRAILING_CLAIM_MS: u64 = 3;
/// First wait after a failed claim; it doubles up to `poll_interval_ms_max`.
const CLAIM_ERROR_BACKOFF_MS_MIN: u64 = 25;
/// Completion statements in flight at once: one commits while the next batch fills.
const COMPLETIONS_IN_FLIGHT_MAX: usize = 2;

impl Executor {
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
    /// Errors of single statements are logged and retried (claims after a short, growing wait);
    /// nothing the database does ends `run`, not even at its start (the listener connects and
    /// reconnects in its own task).
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let inner = &self.inner;
        let c = &inner.config;
        tokio::pin!(shutdown);
        if let Some(point) = crate::outbox::fail_point::armed_name() {
            tracing::warn!(
                point,
                "fail point armed: this replica exits at the first attempt that reaches it (fault injection only)"
            );
        }

        // The listener connects in its own task and keeps retrying: a database that is
        // restarting when `run` starts must not end it (polling covers the gap).
        let listener = c.notify.then(|| {
            let this = self.clone();
            tokio::spawn(async move { this.listen().await })
        });

        // Room for two full completion batches: a channel of `concurrency_max × 2` capped a
        // batch at 20 results with 10 slots, and completions, not claims, bounded the drain.
        let done_slots = (c.concurrency_max as usize * 2).max(c.completion_batch_max as usize * 2);
        let (done_tx, done_rx) = mpsc::channel::<Finished>(done_slots);
        let recorder = {
            let this = self.clone();
            tokio::spawn(async move { this.record_loop(done_rx).await })
        };
        let (stop_housekeeping, stopped) = watch::channel(false);
        let housekeeping = {
            let this = self.clone();
            let stopped = stopped.clone();
            tokio::spawn(async move { this.housekeeping(stopped).await })
        };
        let vacuum = c.vacuum_live.then(|| {
            let this = self.clone();
            let stopped = stopped.clone();
            tokio::spawn(async move { this.vacuum_when_due(stopped).await })
        });
        let pause_watch = {
            let this = self.clone();
            tokio::spawn(async move { this.watch_pauses(stopped).await })
        };
        let fences = Fences::start(inner.statements.clone(), c.fence_margin_ms);

        let (claim_tx, mut claim_rx) =
            mpsc::channel::<ClaimEvent>(2 * c.claims_in_flight_max as usize);
        // Claims in flight, and what they may still bring: counted as in hand, so claims sent
        // together never take more than `claim_ahead_max` beyond the running attempts.
        let mut claiming = 0u32;
        let mut pending_want = 0u32;
        let mut pending_kinds: HashMap<&'static str, u32> = HashMap::new();
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
        // The last claim came back full: more is due than one claim takes, so a second claim
        // may go out while the first runs.
        let mut last_full = false;
        // After a failed claim (the database restarting, a connection killed), the next one
        // waits this long: short at first, so a replica is back to full speed as soon as the
        // database answers again, doubling up to the longest poll interval while it does not.
        let mut error_ms = 0u64;
        // A short claim is followed by a demotion at most once per short poll interval: at a
        // trickle every claim is short, and a demotion after each would double the statements
        // on the path of the next action without uncovering anything.
        let mut last_demotion: Option<Instant> = None;
        let mut trailing_at: Option<Instant> = None;
        loop {
            while tasks.try_join_next().is_some() {}
            self.dispatch(&mut ready, &mut tasks, &done_tx, &fences)
                .await;

            let running = c.concurrency_max - inner.global.available_permits() as u32;
            let in_hand = running + ready.len() as u32 + pending_want;
            let want = hand_max.saturating_sub(in_hand).min(c.claim_batch_max);
            let trailing_due = trailing_at.is_some_and(|at| Instant::now() >= at);
            let worth_it = if error_ms > 0 {
                last_claim.elapsed() >= interval(error_ms)
            } else if trailing_due && claiming == 0 {
                true
            } else if claiming > 0 {
                // A claim is on its way: a second one beside it only for a whole batch. Sent
                // as soon as half a batch was free, it went out at 50-odd actions and held the
                // claims to 66 a statement on average (2026-12-06).
                want >= c.claim_batch_max.min(hand_max)
            } else if !ready.is_empty() {
                // Work is in hand or on its way: refill only by a worthwhile batch. Many small
                // claims cost a statement each, and on a busy server statements are what slows
                // every attempt down.
                want >= claim_threshold
            } else if last_empty {
                hinted || last_claim.elapsed() >= interval(idle_ms)
            } else {
                hinted
                    || want >= claim_threshold
                    || in_hand == 0
                    || last_claim.elapsed() >= interval(c.poll_interval_ms_min)
            };
            // A second claim only while claims come back full, and only when no kind has a
            // claim budget: a budget is read per claim, and two claims read at once would both
            // spend it.
            let may_claim = claiming == 0
                || (claiming < c.claims_in_flight_max && last_full && self.budgets_unlimited());
            // No claim before the pauses were read once (`watch_pauses`).
            let paused = self.paused();
            if let Some(paused) = paused.filter(|_| may_claim && want > 0 && worth_it) {
                let (allowances, caps) = self.allowances(want, &paused, |kind| {
                    let running = inner.per_kind.get(kind).map_or(0, |s| {
                        c.per_kind_concurrency_max - s.available_permits() as u32
                    });
                    let waiting = ready.iter().filter(|r| r.row.kind == kind).count() as u32;
                    let coming = pending_kinds.get(kind).copied().unwrap_or(0);
                    (c.per_kind_concurrency_max + c.claim_ahead_max)
                        .saturating_sub(running + waiting + coming)
                });
                if !allowances.is_empty() {
                    trailing_at = None;
                    claiming += 1;
                    pending_want += want;
                    for (kind, n) in &allowances {
                        *pending_kinds.entry(kind).or_default() += n;
                    }
                    hinted = false;
                    last_claim = Instant::now();
                    let may_demote = last_demotion
                        .is_none_or(|at| at.elapsed() >= interval(c.poll_interval_ms_min));
                    if may_demote {
                        last_demotion = Some(last_claim);
                    }
                    let (this, tx) = (self.clone(), claim_tx.clone());
                    tokio::spawn(async move {
                        let sent = Sent {
                            want,
                            allowances: allowances.clone(),
                        };
                        // An adapter's `claimed` runs inside; a panic there must not leave the
                        // loop waiting for a claim that never finishes.
                        let claim =
                            this.claim_beside(want, allowances, caps, may_demote, tx.clone());
                        let end = match AssertUnwindSafe(claim).catch_unwind().await {
                            Ok(end) => end,
                            Err(_) => {
                                tracing::error!(
                                    "outbox claim panicked; its actions come back when their leases expire"
                                );
                                ClaimEnd::Failed
                            }
                        };
                        let _ = tx.send(ClaimEvent::Finished(sent, end)).await;
                    });
                }
            }

            let mut sleep_ms = if error_ms > 0 {
                error_ms
            } else if in_hand > 0 {
                c.poll_interval_ms_min
            } else {
                idle_ms
            };
            if let Some(at) = trailing_at {
                let left = at.saturating_duration_since(Instant::now()).as_millis() as u64;
                sleep_ms = sleep_ms.min(left.max(1));
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = inner.wake.notified() => hinted = true,
                _ = inner.freed.notified() => {}
                Some(event) = claim_rx.recv() => match event {
                    ClaimEvent::Rows(rows, claimed) => {
                        ready.extend(rows.into_iter().map(|row| Ready { row, claimed }));
                    }
                    ClaimEvent::Finished(sent, end) => {
                        claiming -= 1;
                        pending_want -= sent.want;
                        for (kind, n) in &sent.allowances {
                            if let Some(left) = pending_kinds.get_mut(kind) {
                                *left = left.saturating_sub(*n);
                            }
                        }
                        match end {
                            ClaimEnd::Failed => {
                                error_ms = (error_ms * 2).clamp(
                                    CLAIM_ERROR_BACKOFF_MS_MIN,
                                    c.poll_interval_ms_max,
                                );
                                last_full = false;
                            }
                            ClaimEnd::Done { again, empty, full, found } => {
                                error_ms = 0;
                                if found && !full {
                                    trailing_at = Some(
                                        Instant::now() + interval(TRAILING_CLAIM_MS),
                                    );
                                }
                                hinted |= again;
                                last_empty = empty;
                                last_full = full;
                                idle_ms = if empty {
                                    (idle_ms * 2).min(c.poll_interval_ms_max)
                                } else {
                                    c.poll_interval_ms_min
                                };
                            }
                        }
                    }
                },
                _ = tokio::time::sleep(interval(sleep_ms)) => {}
            }
        }

        // Stop claiming: take in the claims in flight, then give back what has not started, so
        // another replica can run it now rather than after the lease.
        while claiming > 0 {
            match claim_rx.recv().await {
                Some(ClaimEvent::Rows(rows, claimed)) => {
                    ready.extend(rows.into_iter().map(|row| Ready { row, claimed }));
                }
                Some(ClaimEvent::Finished(..)) => claiming -= 1,
                None => claiming = 0,
            }
        }
        self.give_back(ready.drain(..).map(|r| GiveBack::of(&r.row)).collect())
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
        let _ = pause_watch.await;
        // A vacuum of a big table takes seconds and leaves nothing half done: it is cut off, not
        // waited for.
        if let Some(vacuum) = vacuum {
            vacuum.abort();
            let _ = vacuum.await;
        }
        if let Some(listener) = listener {
            listener.abort();
        }
        Ok(())
    }

    /// True when every registered kind's adapter answers [`ClaimBudget::Unlimited`] now.
    fn budgets_unlimited(&self) -> bool {
        self.inner
            .registry
            .all()
            .all(|r| matches!(r.adapter.claim_budget(), ClaimBudget::Unlimited))
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
                stale.push(GiveBack::of(&r.row));
            }
            fresh
        });
        let mut i = 0;
        while i < ready.len() && self.inner.global.available_permits() > 0 {
            let Some(permits) = self.permits(&ready[i].row.kind) else {
                i += 1;
                continue;
            };
            let Some(Ready { row, claimed }) = ready.remove(i) else {
                break;
            };
            let claimed = Claimed {
                row,
                claimed_at: claimed,
                _permits: permits,
            };
            let (this, tx, fences) = (self.clone(), done.clone(), fences.clone());
            tasks.spawn(async move {
                let finished = this.execute(claimed, None, fences).await;
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
    ) -> ClaimEnd {
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
                return ClaimEnd::Failed;
            }
        };
        let full = got == want;
        let mut again = full;
        if !again && may_demote {
            // Short: take the hint off rows that wait behind an earlier action of their lane;
            // if that uncovered anything, the loop looks again now.
            match store::outbox::demote(
                &self.inner.statements,
                self.inner.config.claim_scan_max,
                None,
            )
            .await
            {
                Ok(n) => again = n > 0,
                Err(e) => tracing::warn!(error = %e, "outbox demotion failed"),
            }
        }
        ClaimEnd::Done {
            again,
            empty: got == 0 && !again,
            full,
            found: got > 0,
        }
    }

    /// LISTENs for wake-ups until aborted, connecting (and reconnecting) with a wait of
    /// `poll_interval_ms_max` after each failure; polling covers every gap.
    async fn listen(&self) {
        let wait = Duration::from_millis(self.inner.config.poll_interval_ms_max);
        loop {
            let mut listener = match PgListener::connect_with(&self.inner.pool).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox NOTIFY listener cannot connect; polling meanwhile");
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            if let Err(e) = listener.listen(NOTIFY_CHANNEL).await {
                tracing::warn!(error = %e, "outbox LISTEN failed; polling meanwhile");
                tokio::time::sleep(wait).await;
                continue;
            }
            loop {
                match listener.recv().await {
                    Ok(_) => self.inner.wake.notify_one(),
                    Err(e) => {
                        // sqlx reconnects on the next recv; polling covers the gap.
                        tracing::debug!(error = %e, "outbox NOTIFY listener lost its connection");
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        }
    }

    /// Records finished attempts in batches, up to [`COMPLETIONS_IN_FLIGHT_MAX`] statements at
    /// once. A batch is cut when a statement is free, so results that finish while both run
    /// wait and go together: batches grow with load, and a lone result never waits for company.
    async fn record_loop(&self, mut rx: mpsc::Receiver<Finished>) {
        let max = self.inner.config.completion_batch_max as usize;
        let statements = Arc::new(Semaphore::new(COMPLETIONS_IN_FLIGHT_MAX));
        let mut running = JoinSet::new();
        while let Some(first) = rx.recv().await {
            let Ok(permit) = statements.clone().acquire_owned().await else {
                break;
            };
            while running.try_join_next().is_some() {}
            let mut batch = vec![first];
            while batch.len() < max {
                match rx.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(_) => break,
                }
            }
            let this = self.clone();
            running.spawn(async move {
                if let Err(e) = this.record(batch, None).await {
                    tracing::error!(error = %e, "outbox could not record results; their leases will expire and they will be claimed again");
                }
                drop(permit);
                // A completion may have freed a lane: look for its next action now.
                this.inner.wake.notify_one();
            });
        }
        while running.join_next().await.is_some() {}
    }
}
