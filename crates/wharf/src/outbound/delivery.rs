//! The delivery rate limit (SPEC §3.8): token buckets keyed by (tenant, `delivery`), consulted
//! before claiming so an exhausted tenant never holds a row in EXECUTING.
//!
//! Owns: [`DeliveryBudget`], a bounded map of tenant buckets that the `envelope` adapter
//! consults, the reservations claims leave in it, and how much debt a claim may run up. Must not
//! know: SQL, the claim statement, or HTTP. The bucket arithmetic (refill, burst, debt, waits) is
//! `wharf_core::bucket`'s, the same as the inbox limiters', and the policy is the same
//! [`LimitPolicy`], so delivery is configured like `sync-ingest`, independently.
//!
//! # How it keeps rows from being stranded
//!
//! The adapter answers the outbox's three budget hooks from here:
//!
//! - **Before the claim** ([`DeliveryBudget::claim_budget_at`]): which tenants may start how
//!   many deliveries now, as a [`ClaimBudget::PerTenant`]. The claim statement caps each
//!   tenant's lane heads by it and does not even look at a tenant without a whole token, so an
//!   exhausted tenant's rows stay ADMITTED, untouched (no attempt, no lease, no EXECUTING row),
//!   while other tenants' rows are claimed. The 100-row claim bound, the retry cap, lease
//!   recovery (reclaims are never capped) and dead letters are unchanged.
//! - **Right after the claim** ([`DeliveryBudget::charge_claimed_at`]): the claimed
//!   deliveries are charged to their tenants and reserved for them, so the next claim, which
//!   may come while these still run, sees the tokens spent.
//! - **At execution** ([`DeliveryBudget::start_at`]): a delivery takes one of its tenant's
//!   reservations; only when there is none (it slipped past the claim: another outbox
//!   executor that does not report claims, or a bucket pushed out of a full map) does it take
//!   a token, and without one the adapter answers `Outcome::Defer { until }` with the bucket's
//!   refill time. A deferral puts the row back to ADMITTED at once, counts no attempt and
//!   sends nothing, so even then no row is left EXECUTING or dead-lettered because of the
//!   limit.
//!
//! Like the inbox limiters this is in memory, per replica: N replicas deliver up to N times the
//! rate in total. Set the rate per replica.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use wharf_core::bucket::Bucket;
use wharf_core::bucket::ZERO_RATE_WAIT;

use crate::outbox::ClaimBudget;
use wharf_core::bucket::LimitPolicy;

/// The limiter purpose of delivery, beside the inbox's `sync-ingest`.
pub const DELIVERY_PURPOSE: &str = "delivery";

/// How long to wait for a token that a zero rate never refills, in milliseconds
/// ([`wharf_core::bucket::ZERO_RATE_WAIT`]). An hour, not forever: an operator who raises the
/// rate should not have to restart anything.
pub const ZERO_RATE_WAIT_MS: u64 = ZERO_RATE_WAIT.as_millis() as u64;

/// Most debt a bucket can carry, in bursts. Debt comes only from [`DeliveryBudget::charge_at`]
/// (deliveries the claim already made); bounding it bounds how long one tenant's catch-up can
/// delay its next deliveries.
const DEBT_BURSTS_MAX: u32 = 1;

/// Per-tenant claim allowances for the `envelope` kind at one moment: what the claim needs to
/// know to skip exhausted tenants before it locks anything. [`DeliveryBudget::claim_budget_at`]
/// hands it to the outbox as [`ClaimBudget::PerTenant`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantAllowance {
    /// Deliveries a tenant without a listed number may start (a full bucket: the burst).
    pub others: u32,
    /// Tenants whose buckets are not full, with the deliveries each may start now (0 ⇒ skip).
    pub tenants: Vec<(String, u32)>,
}

impl From<TenantAllowance> for ClaimBudget {
    fn from(allowance: TenantAllowance) -> ClaimBudget {
        ClaimBudget::PerTenant {
            // Only per tenant: the kind as a whole is bounded by the executor's concurrency.
            total: u32::MAX,
            others: allowance.others,
            tenants: allowance.tenants,
        }
    }
}

/// One tenant's bucket, and the deliveries claims charged to it that have not started yet.
#[derive(Debug, Clone, Copy)]
struct Entry {
    bucket: Bucket,
    /// Paid for at the claim ([`DeliveryBudget::charge_at`]), taken by
    /// [`DeliveryBudget::start_at`]. Only a claimed row that never starts (its executor was cut
    /// off) leaves one behind; the tenant's next delivery then starts on it, which keeps the
    /// rate, since the token was charged.
    reserved: u32,
}

struct State {
    buckets: HashMap<String, Entry>,
}

/// The delivery rate limit of one replica: a token bucket per (tenant, `delivery`) under one
/// policy, holding at most `tenants_max` buckets.
///
/// Bounded because the keys come from the outbox: a replica serving many tenants must not grow
/// without end. When the map is full, buckets that have refilled to the burst are dropped first
/// (a full bucket and a missing one mean the same); if none has, the fullest goes, which gives
/// that tenant at most a burst early.
pub struct DeliveryBudget {
    policy: LimitPolicy,
    tenants_max: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for DeliveryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryBudget")
            .field("policy", &self.policy)
            .field("tenants_max", &self.tenants_max)
            .finish_non_exhaustive()
    }
}

impl DeliveryBudget {
    /// A budget with `policy` for every tenant and room for `tenants_max` buckets (at least 1).
    pub fn new(policy: LimitPolicy, tenants_max: usize) -> DeliveryBudget {
        DeliveryBudget {
            policy,
            tenants_max: tenants_max.max(1),
            state: Mutex::new(State {
                buckets: HashMap::new(),
            }),
        }
    }

    /// The policy.
    pub fn policy(&self) -> LimitPolicy {
        self.policy
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A poisoned lock only means a panic mid-update of plain numbers; the map is still
        // usable, and refusing every delivery would be worse.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    fn entry(&self, state: &mut State, tenant: &str, now: Instant) -> Entry {
        match state.buckets.get(tenant) {
            Some(e) => *e,
            None => {
                if state.buckets.len() >= self.tenants_max {
                    self.make_room(state, now);
                }
                Entry {
                    bucket: Bucket::full(self.policy, now),
                    reserved: 0,
                }
            }
        }
    }

    fn make_room(&self, state: &mut State, now: Instant) {
        let burst = f64::from(self.policy.burst);
        let policy = self.policy;
        // A full bucket without reservations means the same as a missing one.
        state
            .buckets
            .retain(|_, e| e.reserved > 0 || e.bucket.refill(policy, now).tokens < burst);
        if state.buckets.len() >= self.tenants_max {
            // The fullest goes, reservations and all: its rows then take tokens from a fresh
            // (full) bucket at execution.
            let fullest = state
                .buckets
                .iter()
                .max_by(|a, b| a.1.bucket.tokens.total_cmp(&b.1.bucket.tokens))
                .map(|(k, _)| k.clone());
            if let Some(k) = fullest {
                state.buckets.remove(&k);
            }
        }
    }

    /// Takes one delivery token of `tenant` now; `Err(wait)` when the tenant is limited.
    /// Ignores reservations: an adapter that charges at the claim calls
    /// [`start`](Self::start) instead.
    pub fn try_acquire(&self, tenant: &str) -> Result<(), Duration> {
        self.try_acquire_at(tenant, Instant::now())
    }

    /// [`try_acquire`](Self::try_acquire) at `now`.
    pub fn try_acquire_at(&self, tenant: &str, now: Instant) -> Result<(), Duration> {
        if self.policy.is_unlimited() {
            return Ok(());
        }
        self.with_state(|state| {
            let entry = self.entry(state, tenant, now);
            let (bucket, result) = entry.bucket.take(self.policy, 1, now);
            state
                .buckets
                .insert(tenant.to_owned(), Entry { bucket, ..entry });
            // One delivery cannot be split: a bucket that can never hold a token (a zero burst)
            // waits like a zero rate.
            result.map_err(|denied| denied.wait())
        })
    }

    /// Charges `n` deliveries of `tenant` that a claim already started (see the module docs),
    /// into debt if need be (at most one burst), and reserves them for
    /// [`start_at`](Self::start_at).
    pub fn charge_at(&self, tenant: &str, n: u32, now: Instant) {
        if self.policy.is_unlimited() || n == 0 {
            return;
        }
        let debt_max = self.policy.burst.saturating_mul(DEBT_BURSTS_MAX);
        self.with_state(|state| {
            let entry = self.entry(state, tenant, now);
            state.buckets.insert(
                tenant.to_owned(),
                Entry {
                    bucket: entry.bucket.charge(self.policy, n, debt_max, now),
                    reserved: entry.reserved.saturating_add(n),
                },
            );
        });
    }

    /// [`charge_at`](Self::charge_at) for what one claim took: the tenant of each claimed
    /// delivery, as [`Adapter::claimed`](crate::outbox::Adapter::claimed) gets them. A
    /// delivery without a tenant is not limited.
    pub fn charge_claimed_at(&self, tenants: &[Option<&str>], now: Instant) {
        let mut counts: HashMap<&str, u32> = HashMap::new();
        for tenant in tenants.iter().flatten() {
            let n = counts.entry(tenant).or_default();
            *n = n.saturating_add(1);
        }
        for (tenant, n) in counts {
            self.charge_at(tenant, n, now);
        }
    }

    /// Starts one delivery of `tenant` now: on a reservation a claim paid for, or else on a
    /// token. `Err(wait)` when there is neither; the adapter answers `Defer { until: wait }`.
    pub fn start(&self, tenant: &str) -> Result<(), Duration> {
        self.start_at(tenant, Instant::now())
    }

    /// [`start`](Self::start) at `now`.
    pub fn start_at(&self, tenant: &str, now: Instant) -> Result<(), Duration> {
        let reserved = self.with_state(|state| match state.buckets.get_mut(tenant) {
            Some(entry) if entry.reserved > 0 => {
                entry.reserved -= 1;
                true
            }
            _ => false,
        });
        if reserved {
            Ok(())
        } else {
            self.try_acquire_at(tenant, now)
        }
    }

    /// Who may start how many deliveries at `now`, for the claim (see [`TenantAllowance`]).
    /// Read-only: nothing is taken until the claim is charged. Tenants listed in order of
    /// name, so equal budgets give equal claims.
    pub fn allowance_at(&self, now: Instant) -> TenantAllowance {
        let policy = self.policy;
        let mut tenants: Vec<(String, u32)> = if !policy.is_unlimited() {
            self.with_state(|state| {
                state
                    .buckets
                    .iter()
                    .map(|(tenant, e)| (tenant, e.bucket.refill(policy, now).whole_tokens()))
                    .filter(|(_, n)| *n < policy.burst)
                    .map(|(tenant, n)| (tenant.clone(), n))
                    .collect()
            })
        } else {
            Vec::new()
        };
        tenants.sort();
        TenantAllowance {
            others: policy.burst,
            tenants,
        }
    }

    /// What the `envelope` adapter answers the claim at `now`: nothing to limit for an
    /// unlimited policy, else [`allowance_at`](Self::allowance_at) per tenant.
    pub fn claim_budget_at(&self, now: Instant) -> ClaimBudget {
        if self.policy.is_unlimited() {
            return ClaimBudget::Unlimited;
        }
        self.allowance_at(now).into()
    }

    /// How many tenants hold a bucket now.
    pub fn tenants(&self) -> usize {
        self.with_state(|state| state.buckets.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: LimitPolicy = LimitPolicy {
        rate_per_s: 2.0,
        burst: 4,
    };

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn a_zero_rate_defers_for_an_hour_and_debt_stops_at_one_burst() {
        let t0 = Instant::now();
        let budget = DeliveryBudget::new(
            LimitPolicy {
                rate_per_s: 0.0,
                burst: 1,
            },
            10,
        );
        assert_eq!(budget.try_acquire_at("a", t0), Ok(()));
        assert_eq!(
            budget.try_acquire_at("a", at(t0, 60_000)),
            Err(Duration::from_millis(ZERO_RATE_WAIT_MS))
        );
        // A claim of 100 over a burst of 4 leaves a debt of 4, not 100: paid off in 2 s at 2/s,
        // then the tenant is full (and unlisted) again 2 s later.
        let budget = DeliveryBudget::new(POLICY, 10);
        budget.charge_at("b", 100, t0);
        assert_eq!(
            budget.allowance_at(at(t0, 2_000)).tenants,
            vec![("b".into(), 0)]
        );
        assert_eq!(
            budget.allowance_at(at(t0, 2_500)).tenants,
            vec![("b".into(), 1)]
        );
        assert_eq!(budget.allowance_at(at(t0, 4_000)).tenants, vec![]);
    }

    #[test]
    fn budget_limits_each_tenant_on_its_own() {
        let budget = DeliveryBudget::new(POLICY, 100);
        let t0 = Instant::now();
        for _ in 0..4 {
            assert!(budget.try_acquire_at("a", t0).is_ok());
        }
        assert_eq!(
            budget.try_acquire_at("a", t0),
            Err(Duration::from_millis(500))
        );
        assert!(
            budget.try_acquire_at("b", t0).is_ok(),
            "b has its own bucket"
        );
        assert!(
            budget.try_acquire_at("a", at(t0, 500)).is_ok(),
            "a refilled one token"
        );
        budget.charge_at("c", 10, t0);
        assert_eq!(
            budget.allowance_at(t0),
            TenantAllowance {
                others: 4,
                tenants: vec![("a".into(), 0), ("b".into(), 3), ("c".into(), 0)],
            }
        );
        // Four seconds later a and b are full again (and so unlisted); c paid off its debt
        // (-4 + 8 = 4).
        assert_eq!(
            budget.allowance_at(at(t0, 4_000)),
            TenantAllowance {
                others: 4,
                tenants: vec![]
            }
        );
    }

    #[test]
    fn buckets_are_bounded() {
        let budget = DeliveryBudget::new(
            LimitPolicy {
                rate_per_s: 0.0,
                burst: 2,
            },
            2,
        );
        let t0 = Instant::now();
        assert!(budget.try_acquire_at("a", t0).is_ok());
        assert!(budget.try_acquire_at("a", t0).is_ok());
        assert!(budget.try_acquire_at("b", t0).is_ok());
        // Full: c pushes out the fullest bucket (b, one token left), never the empty a.
        assert!(budget.try_acquire_at("c", t0).is_ok());
        assert_eq!(budget.tenants(), 2);
        assert!(
            budget.try_acquire_at("a", t0).is_err(),
            "a kept its empty bucket"
        );
    }

    #[test]
    fn a_claim_pays_and_execution_starts_on_the_reservation() {
        let budget = DeliveryBudget::new(POLICY, 100);
        let t0 = Instant::now();
        // A claim took three of a (one of them more than its bucket held) and one without a
        // tenant (not limited).
        budget.charge_claimed_at(&[Some("a"), Some("a"), Some("a"), None], t0);
        assert_eq!(
            budget.claim_budget_at(t0),
            ClaimBudget::PerTenant {
                total: u32::MAX,
                others: 4,
                tenants: vec![("a".into(), 1)],
            }
        );
        // The three start on what the claim paid, though only one token is left.
        for _ in 0..3 {
            assert_eq!(budget.start_at("a", t0), Ok(()));
        }
        assert_eq!(budget.allowance_at(t0).tenants, vec![("a".into(), 1)]);
        // A fourth slipped past the claim: it takes the last token, a fifth waits.
        assert_eq!(budget.start_at("a", t0), Ok(()));
        assert_eq!(
            budget.start_at("a", t0),
            Err(Duration::from_millis(500)),
            "the fallback defers"
        );
        // A claim over the bucket goes into debt, at most one burst.
        budget.charge_claimed_at(&[Some("b"); 10], t0);
        assert_eq!(
            budget.allowance_at(at(t0, 1_000)).tenants,
            vec![("a".into(), 2), ("b".into(), 0)]
        );
        assert_eq!(
            budget.allowance_at(at(t0, 2_500)).tenants,
            vec![("b".into(), 1)],
            "b paid off its debt of one burst (-4 + 5)"
        );
    }

    #[test]
    fn a_full_map_keeps_reservations_over_full_buckets() {
        let budget = DeliveryBudget::new(POLICY, 2);
        let t0 = Instant::now();
        budget.charge_at("a", 4, t0);
        assert!(budget.try_acquire_at("c", t0).is_ok());
        // Ten seconds on, both buckets are full again, but a still holds four reservations:
        // b pushes out c, not a.
        let t1 = at(t0, 10_000);
        budget.charge_at("b", 1, t1);
        assert_eq!(budget.tenants(), 2);
        for _ in 0..4 {
            assert_eq!(budget.start_at("a", t1), Ok(()));
        }
        assert_eq!(
            budget.allowance_at(t1).tenants,
            vec![("b".into(), 3)],
            "a started on its reservations, its bucket untouched"
        );
    }

    #[test]
    fn unlimited_never_limits_or_remembers() {
        let budget = DeliveryBudget::new(LimitPolicy::UNLIMITED, 10);
        let t0 = Instant::now();
        for _ in 0..1_000 {
            assert!(budget.try_acquire_at("a", t0).is_ok());
        }
        budget.charge_at("a", 1_000, t0);
        assert_eq!(budget.start_at("a", t0), Ok(()));
        assert_eq!(budget.tenants(), 0);
        assert_eq!(budget.allowance_at(t0).tenants, vec![]);
        assert_eq!(budget.claim_budget_at(t0), ClaimBudget::Unlimited);
    }
}
