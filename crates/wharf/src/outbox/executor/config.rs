//! The executor's settings and their bounds.
//!
//! Owns: [`ExecutorConfig`], its defaults and [`ExecutorConfig::validate`]. Must not know how
//! the executor uses them.

use super::CLAIM_BATCH_LIMIT;

/// Results one completion statement records at most: bounds its locks and its arrays.
pub const COMPLETION_BATCH_LIMIT: u32 = 1_000;
use crate::outbox::error::Error;
use crate::outbox::kind::Registry;

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
    /// Claim statements `run` keeps in flight at once while claims come back full (1..=4).
    /// Claims lock their rows where they find them (SKIP LOCKED), so two never take the same
    /// row, but two at once walk the same front of due rows: the second steps over the first's
    /// (locked, or taken since its snapshot) before it finds its own. A claim beside another
    /// goes out only for a whole `claim_batch_max`. One at a time is the default: on 2 cores
    /// two drained no faster (medians 17.1 k against 17.8 k jobs/s over five rounds, 24
    /// workers, 2026-12-06), and with the live table of migration 0060 ×1.07 over five rounds
    /// but ×0.95 over three with 1,000 lanes (2026-12-07; BENCHMARKS.md); more may pay where
    /// the server has cores to spare.
    pub claims_in_flight_max: u32,
    /// Let the claim's own commit be the fence of kinds that are not at-most-once (SPEC §2.3,
    /// "refinement for speed"): the claim records `write_started_at`, and `begin_write` answers
    /// without a round trip while the lease, by the monotonic clock taken before the claim was
    /// sent, has more than the fence margin left. At-most-once kinds always fence on their own.
    /// Off: every attempt asks the fence statement (`begin_write.sql`), as under a test clock.
    pub fence_with_claim: bool,
    /// Vacuum the live table when enough dead row versions gathered in it since its last
    /// vacuum (any replica's, or an autovacuum). Each claim and each ending leaves one, and
    /// the claim's walk of due actions steps over the due index's entries of every one of them
    /// until a vacuum removes them: without this, a busy queue's claims slow down until
    /// autovacuum comes, at most once a minute. Needs a role that may vacuum the table (its
    /// owner, as the one that ran the migrations is); for any other role it stays off and says
    /// so once. Off: vacuuming is left to autovacuum.
    pub vacuum_live: bool,
    /// How often the dead row versions are counted (a read of the server's statistics).
    pub vacuum_check_interval_ms: u64,
    /// Dead row versions that start a vacuum, beside `vacuum_dead_per_mille` of the live rows:
    /// PostgreSQL's autovacuum threshold, with this executor's own values. A drained action
    /// leaves two (its claim's and its ending's).
    pub vacuum_dead_rows_min: u64,
    /// Dead row versions, per thousand live rows, that start a vacuum beside
    /// `vacuum_dead_rows_min`. A vacuum reads every index of the table whole, so on a table of
    /// millions of actions it should not run every second.
    pub vacuum_dead_per_mille: u32,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            claim_batch_max: CLAIM_BATCH_LIMIT,
            claim_scan_max: 1_000,
            concurrency_max: 100,
            per_kind_concurrency_max: 100,
            // Two claims of 100: at full speed, what a few hundred fast attempts take covers one
            // claim statement's round trip and commit. Held actions are given back on shutdown
            // and when they wait too long, so a replica cannot sit on them.
            claim_ahead_max: 200,
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
            completion_batch_max: 200,
            drain_rounds_max: 10_000,
            claims_in_flight_max: 1,
            fence_with_claim: true,
            vacuum_live: true,
            vacuum_check_interval_ms: 1_000,
            // 100,000 dead versions: about 50,000 actions, two seconds of a full-speed drain on
            // 2 cores, after which the due index's dead front costs a claim of 100 about 1 ms.
            vacuum_dead_rows_min: 100_000,
            // 5 %: at 10 M live actions, a vacuum after 600,000 dead versions, not 100,000.
            vacuum_dead_per_mille: 50,
        }
    }
}

/// Bounds of [`ExecutorConfig::vacuum_dead_rows_min`]: below 100 a vacuum would follow every
/// few claims; above a billion it never would (switch `vacuum_live` off instead).
pub const VACUUM_DEAD_ROWS_LIMIT_MIN: u64 = 100;
/// See [`VACUUM_DEAD_ROWS_LIMIT_MIN`].
pub const VACUUM_DEAD_ROWS_LIMIT_MAX: u64 = 1_000_000_000;

/// The fence margin's share of the lease that [`ExecutorConfig::with_lease_ms`] derives: a fifth,
/// as the defaults have it (60 s of 300 s).
pub const FENCE_MARGIN_PER_LEASE_DIVISOR: u64 = 5;

impl ExecutorConfig {
    /// The defaults with another lease, and the fence margin derived from it (a fifth of the
    /// lease, [`FENCE_MARGIN_PER_LEASE_DIVISOR`]). The three durations move together: an
    /// attempt's provider call must end within the fence margin, which must end within the
    /// lease, so every kind's `call_timeout_ms` must stay below the derived margin
    /// ([`validate`](Self::validate) names all three when it does not).
    ///
    /// ```
    /// let config = wharf::outbox::ExecutorConfig::with_lease_ms(30_000);
    /// assert_eq!((config.lease_ms, config.fence_margin_ms), (30_000, 6_000));
    /// ```
    pub fn with_lease_ms(lease_ms: u64) -> ExecutorConfig {
        ExecutorConfig {
            lease_ms,
            fence_margin_ms: lease_ms / FENCE_MARGIN_PER_LEASE_DIVISOR,
            ..ExecutorConfig::default()
        }
    }

    /// Dead row versions in the live table that start its vacuum, with `live_rows` live rows:
    /// `vacuum_dead_rows_min` plus `vacuum_dead_per_mille` of them (saturating).
    pub(crate) fn vacuum_threshold_rows(&self, live_rows: u64) -> u64 {
        let share = u128::from(live_rows) * u128::from(self.vacuum_dead_per_mille) / 1_000;
        self.vacuum_dead_rows_min
            .saturating_add(u64::try_from(share).unwrap_or(u64::MAX))
    }

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
        if !(1..=4).contains(&self.claims_in_flight_max) {
            return fail("claims_in_flight_max must be 1..=4".into());
        }
        if self.completion_batch_max > COMPLETION_BATCH_LIMIT {
            return fail(format!(
                "completion_batch_max must be ≤ {COMPLETION_BATCH_LIMIT}"
            ));
        }
        if self.claim_ahead_max > 10_000 {
            return fail("claim_ahead_max must be ≤ 10000".into());
        }
        if self.fence_margin_ms == 0 || self.lease_ms <= self.fence_margin_ms {
            return fail(format!(
                "lease_ms {} must be longer than fence_margin_ms {} (> 0), which must be longer \
                 than every kind's call_timeout_ms: change them together \
                 (ExecutorConfig::with_lease_ms derives the margin from the lease)",
                self.lease_ms, self.fence_margin_ms
            ));
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
            || self.vacuum_check_interval_ms == 0
        {
            return fail("intervals, batch sizes and rounds must be ≥ 1".into());
        }
        if !(VACUUM_DEAD_ROWS_LIMIT_MIN..=VACUUM_DEAD_ROWS_LIMIT_MAX)
            .contains(&self.vacuum_dead_rows_min)
        {
            return fail(format!(
                "vacuum_dead_rows_min must be {VACUUM_DEAD_ROWS_LIMIT_MIN}..={VACUUM_DEAD_ROWS_LIMIT_MAX}"
            ));
        }
        if self.vacuum_dead_per_mille > 1_000 {
            return fail("vacuum_dead_per_mille must be ≤ 1000".into());
        }
        for spec in registry.all().map(|r| &r.spec) {
            if spec.call_timeout_ms >= self.fence_margin_ms {
                return fail(format!(
                    "kind {}: call_timeout_ms {} must be shorter than fence_margin_ms {} \
                     (of lease_ms {}): shorten the kind's call timeout or lengthen the lease \
                     and its margin together",
                    spec.name, spec.call_timeout_ms, self.fence_margin_ms, self.lease_ms
                ));
            }
        }
        Ok(())
    }
}

/// One chainable setter per field, so an application builds its configuration from the defaults
/// (the struct is `#[non_exhaustive]`: outside this crate it cannot be written as a literal).
macro_rules! setters {
    ($($field:ident: $ty:ty,)*) => {
        /// Chainable setters: each sets the field of its name and returns the configuration.
        /// Nothing is checked until [`validate`](Self::validate) (which the executor runs when it
        /// is made). To shorten the lease, prefer [`with_lease_ms`](Self::with_lease_ms), which
        /// moves the fence margin with it.
        ///
        /// ```
        /// let config = wharf::outbox::ExecutorConfig::with_lease_ms(60_000)
        ///     .concurrency_max(24)
        ///     .per_kind_concurrency_max(8)
        ///     .notify(false);
        /// assert_eq!(config.concurrency_max, 24);
        /// assert_eq!(config.per_kind_concurrency_max, 8);
        /// assert!(!config.notify);
        /// assert_eq!(config.fence_margin_ms, 12_000);
        /// ```
        impl ExecutorConfig {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, value: $ty) -> ExecutorConfig {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

setters! {
    claim_batch_max: u32,
    claim_scan_max: u32,
    concurrency_max: u32,
    per_kind_concurrency_max: u32,
    claim_ahead_max: u32,
    lease_ms: u64,
    fence_margin_ms: u64,
    poll_interval_ms_min: u64,
    poll_interval_ms_max: u64,
    notify: bool,
    shutdown_grace_ms: u64,
    sweep_interval_ms: u64,
    sweep_batch_max: u32,
    retention_ms: u64,
    retention_interval_ms: u64,
    retention_batch_max: u32,
    retention_batches_per_run_max: u32,
    gauge_interval_ms: u64,
    completion_batch_max: u32,
    drain_rounds_max: u32,
    claims_in_flight_max: u32,
    fence_with_claim: bool,
    vacuum_live: bool,
    vacuum_check_interval_ms: u64,
    vacuum_dead_rows_min: u64,
    vacuum_dead_per_mille: u32,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::outbox::kind::{Adapter, KindSpec, Outcome};
    use crate::outbox::{Attempt, Backoff};

    struct Slow;

    #[async_trait::async_trait]
    impl Adapter for Slow {
        fn spec(&self) -> KindSpec {
            KindSpec {
                name: "slow",
                at_most_once: false,
                instance_level: true,
                max_attempts_default: 3,
                backoff: Backoff::default(),
                call_timeout_ms: 10_000,
            }
        }
        async fn execute(&self, _attempt: &mut Attempt) -> Outcome {
            Outcome::Done { readback_ref: None }
        }
    }

    fn refusal(config: &ExecutorConfig, registry: &Registry) -> String {
        match config.validate(registry) {
            Err(Error::Config(why)) => why,
            other => panic!("expected a configuration refusal, got {other:?}"),
        }
    }

    #[test]
    fn the_vacuum_threshold_is_the_minimum_plus_a_share_of_the_live_rows() {
        let c = ExecutorConfig::default();
        assert_eq!(c.vacuum_threshold_rows(0), 100_000);
        assert_eq!(c.vacuum_threshold_rows(10_000_000), 600_000);
        assert_eq!(c.vacuum_threshold_rows(19), 100_000); // 0.95 rounds down
        let all = c.clone().vacuum_dead_per_mille(1_000);
        assert_eq!(all.vacuum_threshold_rows(u64::MAX), u64::MAX);
        let none = c.vacuum_dead_per_mille(0);
        assert_eq!(none.vacuum_threshold_rows(u64::MAX), 100_000);
    }

    #[test]
    fn the_vacuum_settings_are_refused_past_their_edges() {
        let registry = Registry::new();
        let ok = |c: ExecutorConfig| c.validate(&registry).is_ok();
        let c = ExecutorConfig::default;
        assert!(ok(c().vacuum_dead_rows_min(VACUUM_DEAD_ROWS_LIMIT_MIN)));
        assert!(ok(c().vacuum_dead_rows_min(VACUUM_DEAD_ROWS_LIMIT_MAX)));
        assert!(ok(c().vacuum_dead_per_mille(0)));
        assert!(ok(c().vacuum_dead_per_mille(1_000)));
        assert!(ok(c().vacuum_check_interval_ms(1)));
        let why = refusal(
            &c().vacuum_dead_rows_min(VACUUM_DEAD_ROWS_LIMIT_MIN - 1),
            &registry,
        );
        assert!(
            why.contains("vacuum_dead_rows_min must be 100..=1000000000"),
            "{why}"
        );
        let why = refusal(
            &c().vacuum_dead_rows_min(VACUUM_DEAD_ROWS_LIMIT_MAX + 1),
            &registry,
        );
        assert!(why.contains("vacuum_dead_rows_min"), "{why}");
        let why = refusal(&c().vacuum_dead_per_mille(1_001), &registry);
        assert!(
            why.contains("vacuum_dead_per_mille must be ≤ 1000"),
            "{why}"
        );
        let why = refusal(&c().vacuum_check_interval_ms(0), &registry);
        assert!(why.contains("intervals"), "{why}");
        // Switched off, the bounds still hold: switching it on again must not surprise.
        let why = refusal(
            &c().vacuum_live(false).vacuum_dead_per_mille(1_001),
            &registry,
        );
        assert!(why.contains("vacuum_dead_per_mille"), "{why}");
    }

    #[test]
    fn a_shorter_lease_brings_its_fence_margin_and_the_refusals_name_all_three() {
        let mut registry = Registry::new();
        registry.register(Arc::new(Slow)).unwrap();
        let c = ExecutorConfig::with_lease_ms(60_000);
        assert_eq!((c.lease_ms, c.fence_margin_ms), (60_000, 12_000));
        assert!(c.validate(&registry).is_ok());
        // A lease whose derived margin is shorter than the kind's call timeout.
        let short = ExecutorConfig::with_lease_ms(30_000);
        let why = refusal(&short, &registry);
        assert!(
            why.contains("call_timeout_ms 10000")
                && why.contains("fence_margin_ms 6000")
                && why.contains("lease_ms 30000"),
            "{why}"
        );
        // A lease shortened alone, the margin left at its default.
        let alone = ExecutorConfig {
            lease_ms: 30_000,
            ..ExecutorConfig::default()
        };
        let why = refusal(&alone, &registry);
        assert!(
            why.contains("lease_ms 30000")
                && why.contains("fence_margin_ms 60000")
                && why.contains("call_timeout_ms")
                && why.contains("with_lease_ms"),
            "{why}"
        );
    }
}
