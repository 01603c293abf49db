//! The executor: claims due actions, runs their adapters, records the results, and keeps the
//! table tidy (sweeps, retention, gauges). Run one per replica; there is no leader.
//!
//! Owns: the claim loop, claim-ahead (actions held for the next free slot), concurrency
//! (overall and per kind), claim budgets (per kind, and the per-tenant caps a claim applies
//! before it locks anything), the call timeout, panic capture, completion batching, wake-ups
//! (NOTIFY hint + polling with backoff), sweeps, retention, `drain`, and graceful shutdown.
//! Fence batching is `fences.rs`; the settings are `executor/config.rs`; the long-running loop
//! of `run` (claim-ahead, dispatch, the recorder and listener tasks) is `executor/run.rs`;
//! sweeps, retention, gauges and the housekeeping task are `executor/maintenance.rs`. This file
//! keeps what one claim and one attempt need: allowances, the claim itself, give-back,
//! `execute`, `record`, and the one-shot paths (`run_once`, `drain`). Must not know: any provider, or any SQL text (the store has
//! it). The pure decision of what a result means is [`super::decide`].
//!
//! Invariants kept here:
//! - No provider call runs inside a database transaction: `execute` runs between the claim's
//!   statement and the completion's statement, holding no connection.
//! - Every write after a claim names (id, epoch): completion, release and the fence.
//! - A row is never stranded: an action whose attempt did not finish keeps its lease, and any
//!   executor reclaims it when the lease runs out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::FutureExt;
use rand::Rng;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::attempt::{Attempt, FenceStage};
use super::caps::{Caps, KindCaps};
use super::decide::{Claim, Ran, decide};
use super::error::Error;
use super::fail_point::{self, FailPoint};
use super::fences::Fences;
use super::kind::{ClaimBudget, Registry};
use super::metrics;
use super::pause::{self, PauseSet};
use crate::held::Held;
use crate::store;

mod config;
mod maintenance;
mod run;

use crate::store::outbox::{ClaimedRow, CompletionRow};
pub use config::{
    ExecutorConfig, FENCE_MARGIN_PER_LEASE_DIVISOR, VACUUM_DEAD_ROWS_LIMIT_MAX,
    VACUUM_DEAD_ROWS_LIMIT_MIN,
};
pub use maintenance::LiveVacuum;

/// Hard ceiling of one claim (SPEC §2.3): bounds the statement's locks and the batch's work.
pub const CLAIM_BATCH_LIMIT: u32 = 100;
/// The NOTIFY channel enqueue signals on.
pub const NOTIFY_CHANNEL: &str = "wharf_action";
/// Times a claim is retried when two replicas raced for one lane (unique violation).
const CLAIM_RACE_RETRIES_MAX: u32 = 3;
/// How long a completion batch is retried on a database error, at most (and never longer than
/// the lease): a result is worth waiting for. Its effect happened; dropping it leaves the
/// action to wait out its lease and end UNCERTAIN or run again. A PostgreSQL restart takes
/// seconds, and three quick retries (what this replaced) gave up within one.
const COMPLETE_RETRY_MS_MAX: u64 = 30_000;
/// First wait before a completion is retried; it doubles up to [`COMPLETE_RETRY_WAIT_MS_MAX`].
const COMPLETE_RETRY_WAIT_MS_MIN: u64 = 50;
/// Longest wait between two tries of one completion batch.
const COMPLETE_RETRY_WAIT_MS_MAX: u64 = 1_000;

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

/// Connections of the executor's own statement pool: two capped claims or demotions, two
/// completion batches, two fence statements, the housekeeping task and one to spare. (Plain
/// claims have a pool of their own.)
const STATEMENT_CONNECTIONS_MAX: u32 = 8;

/// One finished attempt, waiting to be recorded.
struct Finished {
    kind: String,
    action_id: i64,
    attempt: u32,
    label: &'static str,
    row: Option<CompletionRow>,
    /// The attempt's fence could not reach the database and the adapter gave up without
    /// calling its provider: give the action back now rather than let it wait out its lease.
    give_back: Option<GiveBack>,
}

/// A claimed action to give back unrun (`release.sql`), fenced by (id, epoch).
#[derive(Debug, Clone, Copy)]
struct GiveBack {
    id: i64,
    epoch: i64,
    /// Clear `write_started_at`: only this claim can have set it (its claim was the fence, or a
    /// fence whose answer was lost), and nothing was written.
    clear_fence: bool,
}

impl GiveBack {
    fn of(row: &ClaimedRow) -> GiveBack {
        GiveBack {
            id: row.id,
            epoch: row.epoch,
            // No mark before this claim: any mark now is this attempt's, and it wrote nothing.
            clear_fence: !row.write_started,
        }
    }
}

/// A claimed action with the permits it runs under.
struct Claimed {
    row: ClaimedRow,
    /// Read before the claim statement was sent: the lease started no earlier.
    claimed_at: Instant,
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

struct Inner {
    /// The application's pool: adapters' read-only look-ups and the NOTIFY listener.
    pool: PgPool,
    /// The executor's own small pool for its statements (claims, fences, completions, sweeps),
    /// on the same server and credentials. Its sessions run without JIT (a claim over a large
    /// table crossed the JIT cost threshold and spent most of its time compiling) and without a
    /// test round trip before each statement: a dead connection shows up as the statement's
    /// error, which every caller handles anyway.
    statements: PgPool,
    /// The claim statement's own connections (one per claim in flight, at most
    /// `claims_in_flight_max` kept): it keeps one generic plan per connection, under settings
    /// that fix that plan's shape ([`store::outbox::CLAIM_SESSION_OPTIONS`]), so a claim is not
    /// planned on every call. Held, not pooled: a pool pings every connection that comes back
    /// before it lends it again, and with one claim in flight the next claim waited for that
    /// round trip (`crate::held`).
    claims: Held,
    registry: Arc<Registry>,
    config: ExecutorConfig,
    global: Arc<Semaphore>,
    per_kind: HashMap<&'static str, Arc<Semaphore>>,
    /// Wakes the loop to look for work: a NOTIFY arrived or a completion freed a lane.
    wake: Notify,
    /// Wakes the loop to start prefetched actions: an attempt ended and freed its slot.
    freed: Notify,
    /// The pauses claims skip, as last read; `None` until the first read, and no claim is
    /// made before it (a restarted replica must not claim a paused kind).
    pauses: std::sync::RwLock<Option<Arc<PauseSet>>>,
    /// Dead row versions this executor's last vacuum of the live table could not remove (an
    /// older snapshot still saw them): the next vacuum waits for a threshold beyond these, so
    /// a long transaction elsewhere does not make it vacuum again every check.
    vacuum_dead_left: std::sync::atomic::AtomicU64,
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
    ///
    /// Connections: the executor opens its own small pools for its statements (claims, fences,
    /// completions, sweeps, the live table's vacuum; at most 8 connections, plus one per claim in flight for the claims,
    /// made lazily from `pool`'s connect options), so a busy application pool never holds up a
    /// fence. `pool` itself serves the NOTIFY
    /// listener (one connection while [`run`](Executor::run) runs, with `notify` on) and the
    /// adapters' [`Attempt::read_only`](super::Attempt::read_only) look-ups (at most one per
    /// running attempt, so up to `concurrency_max`). Size it at `concurrency_max + 1` beyond
    /// what the application itself needs; a smaller pool is safe, and only makes look-ups wait.
    /// Each replica opens the same, so PostgreSQL's `max_connections` bounds the replicas.
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
        let statements = statement_pool(&pool);
        let claims = claim_connections(&pool, &statements, config.claims_in_flight_max);
        Ok(Executor {
            inner: Arc::new(Inner {
                statements,
                claims,
                pool,
                global: Arc::new(Semaphore::new(config.concurrency_max as usize)),
                per_kind,
                registry,
                config,
                wake: Notify::new(),
                freed: Notify::new(),
                pauses: std::sync::RwLock::new(None),
                vacuum_dead_left: std::sync::atomic::AtomicU64::new(0),
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
        // The same fence path as `run`: this batch's fences share statements, on `now`.
        let fences = Fences::start(
            self.inner.statements.clone(),
            self.inner.config.fence_margin_ms,
        );
        let finished = futures::future::join_all(
            claimed
                .into_iter()
                .map(|c| self.execute(c, now, fences.clone())),
        )
        .await;
        drop(fences);
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
            let moved = store::outbox::make_due(&self.inner.statements, now).await?;
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

    /// The kinds this executor may claim now, each with how many it may take, and the
    /// per-tenant caps of the kinds that answered [`ClaimBudget::PerTenant`] (only caps that
    /// can bind a claim of `want`; see [`KindCaps::new`]). `room` says how many actions of a
    /// kind this executor can take on now.
    ///
    /// Paused kinds are left out; a kind paused for some tenants gets a cap of 0 for each of
    /// them (beside its own caps, if it has any), so the capped claim never looks at them.
    fn allowances(
        &self,
        want: u32,
        paused: &PauseSet,
        room: impl Fn(&str) -> u32,
    ) -> (HashMap<&'static str, u32>, Caps) {
        let inner = &self.inner;
        let mut kinds = HashMap::new();
        let mut caps = Caps::default();
        for r in inner.registry.all() {
            if !inner.per_kind.contains_key(r.spec.name) || paused.kind_paused(r.spec.name) {
                continue;
            }
            let permits = room(r.spec.name);
            let (budget, mut per_tenant) = match r.adapter.claim_budget() {
                ClaimBudget::Unlimited => (u32::MAX, None),
                ClaimBudget::AtMost(n) => (n, None),
                ClaimBudget::PerTenant {
                    total,
                    others,
                    tenants,
                } => (total, Some((others, tenants))),
            };
            let stopped = paused.tenants(r.spec.name);
            if !stopped.is_empty() {
                let (_, listed) = per_tenant.get_or_insert_with(|| (u32::MAX, Vec::new()));
                listed.extend(stopped.iter().map(|t| (t.clone(), 0)));
            }
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

    /// Reads the pauses in force, keeps them for the claims to come, and sets the gauge.
    pub(super) async fn refresh_pauses(&self) -> Result<Arc<PauseSet>, Error> {
        let fresh = Arc::new(PauseSet::new(&pause::pauses(&self.inner.statements).await?));
        let before = {
            let mut slot = self.inner.pauses.write().unwrap_or_else(|e| e.into_inner());
            slot.replace(fresh.clone())
        };
        let Some(before) = before else {
            // The loop held its claims for this first read: wake it.
            self.inner.wake.notify_one();
            for (kind, tenant) in fresh.each() {
                metrics::paused(kind, tenant, true);
            }
            return Ok(fresh);
        };
        if *before != *fresh {
            let now: HashSet<(&str, Option<&str>)> = fresh.each().collect();
            for (kind, tenant) in before.each().filter(|p| !now.contains(p)) {
                metrics::paused(kind, tenant, false);
            }
            for (kind, tenant) in &now {
                metrics::paused(kind, *tenant, true);
            }
        }
        Ok(fresh)
    }

    /// The pauses as last read; `None` before the first read.
    pub(super) fn paused(&self) -> Option<Arc<PauseSet>> {
        self.inner
            .pauses
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
        // Read fresh on every call: this path is the tests' and `wharf drain`'s, where a pause
        // must hold from the moment it committed.
        let paused = self.refresh_pauses().await?;
        let (mut allowances, mut caps) = self.allowances(want, &paused, |kind| {
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
            match store::outbox::demote(&inner.statements, inner.config.claim_scan_max, now).await {
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
                    claimed_at: started,
                    _permits: permits,
                }),
                None => back.push(GiveBack::of(&row)),
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
                _ => back.push(GiveBack::of(&row)),
            }
        }
        self.tell_claimed(&kept);
        self.give_back(back).await;
        Ok(kept)
    }

    /// Gives claimed actions back unrun: ADMITTED again, due now, no attempt counted (fenced
    /// by (id, epoch)). A failure is logged, never returned: the actions come back when their
    /// leases run out.
    async fn give_back(&self, rows: Vec<GiveBack>) {
        if rows.is_empty() {
            return;
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let epochs: Vec<i64> = rows.iter().map(|r| r.epoch).collect();
        let clear: Vec<bool> = rows.iter().map(|r| r.clear_fence).collect();
        metrics::given_back(rows.len());
        let released = match store::outbox::release(&self.inner.statements, &ids, &epochs, &clear)
            .await
        {
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

    /// The plain claim (`claim.sql`) on one of the claim's held connections, given back after.
    async fn claim_plain(
        &self,
        want: u32,
        now: Option<DateTime<Utc>>,
        kinds: &[&str],
        fence_kinds: &[&str],
    ) -> Result<Vec<ClaimedRow>, sqlx::Error> {
        let c = &self.inner.config;
        let mut conn = self.inner.claims.take().await?;
        let claimed = store::outbox::claim(
            &mut conn,
            want,
            c.lease_ms,
            now,
            kinds,
            c.claim_scan_max,
            fence_kinds,
        )
        .await;
        // A race's unique violation (`claim_rows` retries it) leaves the session idle and its
        // plan worth keeping; anything else closes it, a session the server ended (57P01
        // arrives as a database error) among them.
        let clean = match &claimed {
            Ok(_) => true,
            Err(sqlx::Error::Database(e)) => e.is_unique_violation(),
            Err(_) => false,
        };
        self.inner.claims.give_back(conn, clean);
        claimed
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
        let fence_kinds = self.claim_fence_kinds(kinds, now);
        let mut tries = 0;
        loop {
            let claimed = match &tenant_caps {
                None => self.claim_plain(want, now, kinds, &fence_kinds).await,
                Some(tenant_caps) => {
                    store::outbox::claim_capped(
                        &self.inner.statements,
                        want,
                        c.lease_ms,
                        now,
                        kinds,
                        c.claim_scan_max,
                        tenant_caps,
                        &fence_kinds,
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

    /// The kinds among `kinds` whose claim is their fence: not at-most-once, whose adapter
    /// allows it (`Adapter::claim_may_fence`), with `fence_with_claim` on, and never under a test clock (the claim-as-fence check reads the
    /// monotonic clock, which a test clock does not move).
    fn claim_fence_kinds<'k>(&self, kinds: &[&'k str], now: Option<DateTime<Utc>>) -> Vec<&'k str> {
        if !self.inner.config.fence_with_claim || now.is_some() {
            return Vec::new();
        }
        kinds
            .iter()
            .copied()
            .filter(|k| {
                self.inner
                    .registry
                    .get(k)
                    .is_some_and(|r| !r.spec.at_most_once && r.adapter.claim_may_fence())
            })
            .collect()
    }

    /// Runs one claimed action's adapter under the call timeout, catching a panic, and decides
    /// the result. Holds no connection while the adapter runs.
    async fn execute(
        &self,
        claimed: Claimed,
        now: Option<DateTime<Utc>>,
        fences: Fences,
    ) -> Finished {
        let inner = &self.inner;
        let row = claimed.row;
        let Some(registered) = inner.registry.get(&row.kind) else {
            // Unreachable: claims name registered kinds only. Recording nothing keeps the row
            // for an executor that knows the kind.
            return Finished {
                kind: row.kind,
                action_id: row.id,
                attempt: u32::try_from(row.attempt).unwrap_or(u32::MAX),
                label: "abandoned",
                row: None,
                give_back: None,
            };
        };
        let give_back = GiveBack::of(&row);
        let claim_marked = row.claim_fenced && !row.write_started;
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
            enqueued_at: row.created_at,
            write_started: row.write_started,
            pool: inner.pool.clone(),
            call_timeout,
            fence_margin_ms: inner.config.fence_margin_ms,
            now,
            fence: FenceStage::NotStarted,
            claim_fence: (row.claim_fenced && now.is_none()).then_some(claimed.claimed_at),
            lease_ms: inner.config.lease_ms,
            give_back_on_abandon: false,
            fences,
        };
        fail_point::reached(FailPoint::Claimed, row.id);
        let started = Instant::now();
        let call = AssertUnwindSafe(registered.adapter.execute(&mut attempt)).catch_unwind();
        let ran = match tokio::time::timeout(call_timeout, call).await {
            Ok(Ok(outcome)) => {
                fail_point::reached(FailPoint::Answered, row.id);
                Ran::Returned(outcome)
            }
            Ok(Err(_panic)) => Ran::Panicked,
            Err(_elapsed) => Ran::TimedOut,
        };
        metrics::execution_took(&row.kind, started.elapsed());
        let jitter = rand::thread_rng().gen_range(-1.0..=1.0);
        let decided = decide(
            claim,
            &ran,
            attempt.fence,
            claim_marked,
            &spec.backoff,
            jitter,
        );
        // Abandoned after a fence that refused while this claim still held the action (the
        // database could not be reached, or too little lease was left): the adapter did not
        // call its provider. Give it back now; waiting out the lease (minutes) for a dropped
        // connection is what left actions stuck after a backend was killed.
        let give_back = (decided.is_none() && attempt.give_back_on_abandon).then_some(give_back);
        Finished {
            kind: row.kind,
            action_id: row.id,
            attempt: claim.attempt,
            label: ran.label(),
            row: decided,
            give_back,
        }
    }

    /// Records finished attempts in one statement, fenced by (id, epoch), and counts them.
    async fn record(
        &self,
        finished: Vec<Finished>,
        now: Option<DateTime<Utc>>,
    ) -> Result<(), Error> {
        let back: Vec<GiveBack> = finished.iter().filter_map(|f| f.give_back).collect();
        self.give_back(back).await;
        let rows: Vec<CompletionRow> = finished.iter().filter_map(|f| f.row.clone()).collect();
        let mut recorded: HashSet<i64> = HashSet::new();
        if !rows.is_empty() {
            // Every try is fenced by (id, epoch), so retrying past a reclaim records nothing
            // wrong: a superseded row is simply not returned.
            let budget =
                Duration::from_millis(self.inner.config.lease_ms.min(COMPLETE_RETRY_MS_MAX));
            let started = Instant::now();
            let mut wait_ms = COMPLETE_RETRY_WAIT_MS_MIN;
            let mut tries = 0u32;
            loop {
                match store::outbox::complete(&self.inner.statements, &rows, now).await {
                    Ok(ids) => {
                        if tries > 0 {
                            tracing::info!(
                                tries,
                                rows = rows.len(),
                                "outbox completion recorded after retries"
                            );
                        }
                        recorded.extend(ids);
                        break;
                    }
                    Err(e) if started.elapsed() + Duration::from_millis(wait_ms) < budget => {
                        tries += 1;
                        tracing::warn!(error = %e, tries, "outbox completion failed; retrying");
                        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                        wait_ms = (wait_ms * 2).min(COMPLETE_RETRY_WAIT_MS_MAX);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for f in &finished {
            let Some(row) = &f.row else {
                metrics::attempt(&f.kind, f.label, false);
                metrics::attempt_logged(
                    &f.kind,
                    f.action_id,
                    f.attempt,
                    f.label,
                    None,
                    f.give_back.is_some(),
                );
                continue;
            };
            let was_recorded = recorded.contains(&row.id);
            metrics::attempt(&f.kind, f.label, was_recorded);
            metrics::attempt_logged(
                &f.kind,
                f.action_id,
                f.attempt,
                f.label,
                row.error_code.as_deref(),
                was_recorded,
            );
            if !was_recorded {
                tracing::info!(action_id = row.id, epoch = row.epoch, kind = %f.kind,
                    "attempt result dropped: the claim was superseded or the action erased");
                continue;
            }
            if let Some(reason) = row.next.stop_reason() {
                metrics::ended(&f.kind, row.id, reason.state(), reason);
            }
        }
        Ok(())
    }
}

/// The executor's statement pool over `pool`'s server and credentials (see [`Inner`]).
fn statement_pool(pool: &PgPool) -> PgPool {
    // Not `plan_cache_mode=force_generic_plan`, although planning is ~8 % of the server in a
    // drain: a generic plan is made once per connection, and one made while the table was empty
    // (a fresh install, a drained queue) scanned it whole once it had grown, claims of 100 rows
    // taking 8 s in a latency run. Only the claim, whose plan's shape its session settings fix,
    // keeps a generic plan (`claim_connections`); the completion needs its hash join.
    own_pool(
        pool,
        "wharf executor",
        &[("jit", "off")],
        STATEMENT_CONNECTIONS_MAX,
    )
}

/// The claim statement's connections: opened as `pool` opens its own, with
/// [`store::outbox::CLAIM_SESSION_OPTIONS`], following the executor's `statements` pool (its
/// acquire timeout, and never closed while the executor lives); `connections` of them kept.
fn claim_connections(pool: &PgPool, statements: &PgPool, connections: u32) -> Held {
    Held::with_options(
        statements.clone(),
        own_options(
            pool,
            "wharf executor claims",
            &store::outbox::CLAIM_SESSION_OPTIONS,
        ),
        connections.max(1) as usize,
    )
}

/// A pool of the executor's own on `pool`'s server and credentials: at most `connections`,
/// made lazily, each with the session `settings`, and no test round trip before each
/// statement (a dead connection shows up as the statement's error, which every caller handles).
fn own_pool(pool: &PgPool, name: &str, settings: &[(&str, &str)], connections: u32) -> PgPool {
    let options = own_options(pool, name, settings);
    PgPoolOptions::new()
        .max_connections(connections)
        .min_connections(0)
        .test_before_acquire(false)
        .acquire_timeout(pool.options().get_acquire_timeout())
        .connect_lazy_with(options)
}

/// `pool`'s connect options (server, credentials), under the application name `name` and with
/// the session `settings`.
fn own_options(pool: &PgPool, name: &str, settings: &[(&str, &str)]) -> PgConnectOptions {
    (*pool.connect_options())
        .clone()
        .application_name(name)
        .options(settings.iter().copied())
}
