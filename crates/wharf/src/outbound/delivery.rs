//! The delivery rate limit (SPEC §3.8): token buckets keyed by (tenant, `delivery`), consulted
//! before claiming so an exhausted tenant never holds a row in EXECUTING.
//!
//! Owns: the bucket arithmetic (pure functions of a bucket, the policy and `now`, tested as
//! tables without sleeping) and [`DeliveryBudget`], a bounded map of tenant buckets that the
//! `envelope` adapter consults. Must not know: SQL, the claim, or HTTP. The policy type is the
//! inbox's [`LimitPolicy`], so delivery is configured like `sync-ingest`, independently.
//!
//! # How it keeps rows from being stranded
//!
//! Two checks, one before and one after the claim:
//!
//! - **Before the claim** ([`DeliveryBudget::allowance_at`]): which tenants may start how many
//!   deliveries now. The outbox's claim hook today takes one number per kind
//!   ([`ClaimBudget::AtMost`](crate::outbox::ClaimBudget)), which cannot say "tenant A: 0,
//!   tenant B: 5"; the per-tenant allowance needs the claim extension described on
//!   [`TenantAllowance`]. With it, a tenant without tokens has no row claimed at all, and the
//!   claim bound, retries, leases and dead letters are untouched.
//! - **At execution** ([`DeliveryBudget::try_acquire_at`]): the adapter takes the tenant's
//!   token before `begin_write`; without one it answers `Outcome::Defer { until }` with the
//!   bucket's refill time. A deferral puts the row back to ADMITTED at once, counts no attempt
//!   and sends nothing, so even a row claimed past its tenant's budget (today, or in a race
//!   between replicas) is never left EXECUTING and never reaches the dead letters because of
//!   the limit.
//!
//! Like the inbox limiters this is in memory, per replica: N replicas deliver up to N times the
//! rate in total. Set the rate per replica.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::inbox::LimitPolicy;

/// The limiter purpose of delivery, beside the inbox's `sync-ingest`.
pub const DELIVERY_PURPOSE: &str = "delivery";

/// How long to wait for a token that a zero rate never refills. An hour, not forever: an
/// operator who raises the rate should not have to restart anything.
pub const ZERO_RATE_WAIT_MS: u64 = 60 * 60 * 1_000;

/// Most debt a bucket can carry, as a multiple of its burst. Debt comes only from
/// [`DeliveryBudget::charge_at`] (deliveries the claim already made); bounding it bounds how long
/// one tenant's catch-up can delay its next deliveries.
const DEBT_BURSTS_MAX: f64 = 1.0;

/// One tenant's bucket: tokens left at `updated`. Negative tokens are debt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens left; at most the burst, at least minus the burst.
    pub tokens: f64,
    /// When `tokens` was computed.
    pub updated: Instant,
}

impl Bucket {
    /// A full bucket: a tenant seen for the first time may deliver its burst at once.
    pub fn full(policy: LimitPolicy, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(policy.burst),
            updated: now,
        }
    }
}

/// The bucket refilled up to `now`. A `now` before `updated` (a caller's clocks disagreeing)
/// refills nothing and keeps `updated`, so time never runs backwards for a bucket.
pub fn refill(bucket: Bucket, policy: LimitPolicy, now: Instant) -> Bucket {
    let burst = f64::from(policy.burst);
    if !policy.rate_per_s.is_finite() {
        return Bucket {
            tokens: burst,
            updated: now.max(bucket.updated),
        };
    }
    let elapsed_s = now.saturating_duration_since(bucket.updated).as_secs_f64();
    Bucket {
        tokens: (bucket.tokens + elapsed_s * policy.rate_per_s.max(0.0)).min(burst),
        updated: now.max(bucket.updated),
    }
}

/// Whole tokens in a (refilled) bucket: how many deliveries may start now.
pub fn whole_tokens(bucket: Bucket) -> u32 {
    if bucket.tokens < 1.0 {
        0
    } else {
        // Saturating float-to-int cast: a burst is a u32, so this never saturates in practice.
        bucket.tokens.floor() as u32
    }
}

/// How long until a (refilled) bucket holds one whole token; zero when it does.
pub fn until_one(bucket: Bucket, policy: LimitPolicy) -> Duration {
    if bucket.tokens >= 1.0 {
        return Duration::ZERO;
    }
    if policy.rate_per_s > 0.0 {
        Duration::from_secs_f64((1.0 - bucket.tokens) / policy.rate_per_s)
    } else {
        Duration::from_millis(ZERO_RATE_WAIT_MS)
    }
}

/// Takes one token at `now`: the bucket after, and `Err(wait)` (nothing taken) when there is no
/// whole token.
pub fn take_one(
    bucket: Bucket,
    policy: LimitPolicy,
    now: Instant,
) -> (Bucket, Result<(), Duration>) {
    let b = refill(bucket, policy, now);
    if b.tokens >= 1.0 {
        (
            Bucket {
                tokens: b.tokens - 1.0,
                ..b
            },
            Ok(()),
        )
    } else {
        (b, Err(until_one(b, policy)))
    }
}

/// Takes `n` tokens at `now` whether or not they are there, down to a debt of one burst: for
/// deliveries that were already decided (claimed under an allowance).
pub fn charge(bucket: Bucket, policy: LimitPolicy, n: u32, now: Instant) -> Bucket {
    let b = refill(bucket, policy, now);
    if !policy.rate_per_s.is_finite() {
        return b;
    }
    let floor = -f64::from(policy.burst) * DEBT_BURSTS_MAX;
    Bucket {
        tokens: (b.tokens - f64::from(n)).max(floor),
        ..b
    }
}

/// Per-tenant claim allowances for the `envelope` kind at one moment: what the claim needs to
/// know to skip exhausted tenants before it locks anything.
///
/// # The outbox extension this needs
///
/// The outbox's claim hook cannot carry it yet. The extension (in `outbox/kind.rs`,
/// `outbox/executor.rs` and `sql/outbox/claim.sql`) is:
///
/// 1. `ClaimBudget::PerTenant { total: u32, others: u32, tenants: Vec<(String, u32)> }`: at most
///    `total` of the kind this claim; of a listed tenant at most its number (0 ⇒ none); of an
///    unlisted tenant at most `others`. The envelope adapter's `claim_budget()` answers it from
///    [`DeliveryBudget::allowance_at`] (`others` is the burst: a tenant without a bucket has a
///    full one).
/// 2. `claim.sql` takes three more arrays, `$6 text[]` kind, `$7 text[]` tenant (NULL = the
///    kind's `others`), `$8 integer[]` rows, and filters the lane heads before `picked`:
///    `row_number() OVER (PARTITION BY kind, tenant_id ORDER BY run_at, id) <= cap`, where a
///    kind without entries is uncapped. Reclaims of expired leases are not capped, so lease
///    recovery is exactly as before.
/// 3. After the claim, the executor reports the claimed rows per kind to a new
///    `Adapter::claimed(&self, tenants: &[Option<&str>])` hook (default: nothing), which the
///    envelope adapter forwards to [`DeliveryBudget::charge_at`]; the adapter then skips
///    `try_acquire` for those rows. Charging at the claim, not at execution, is what keeps a
///    second claim (while the first batch still runs) from spending the same tokens.
///
/// The 100-row claim bound, retry cap, lease and dead-letter rules do not change: the caps only
/// remove rows from the candidate set, and anything over a cap that slips through is released
/// by the executor's existing over-allowance path (`release.sql`, no attempt counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantAllowance {
    /// Deliveries a tenant without a listed number may start (a full bucket: the burst).
    pub others: u32,
    /// Tenants whose buckets are not full, with the deliveries each may start now (0 ⇒ skip).
    pub tenants: Vec<(String, u32)>,
}

struct State {
    buckets: HashMap<String, Bucket>,
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

    fn bucket(&self, state: &mut State, tenant: &str, now: Instant) -> Bucket {
        match state.buckets.get(tenant) {
            Some(b) => *b,
            None => {
                if state.buckets.len() >= self.tenants_max {
                    self.make_room(state, now);
                }
                Bucket::full(self.policy, now)
            }
        }
    }

    fn make_room(&self, state: &mut State, now: Instant) {
        let burst = f64::from(self.policy.burst);
        let policy = self.policy;
        state
            .buckets
            .retain(|_, b| refill(*b, policy, now).tokens < burst);
        if state.buckets.len() >= self.tenants_max {
            let fullest = state
                .buckets
                .iter()
                .max_by(|a, b| a.1.tokens.total_cmp(&b.1.tokens))
                .map(|(k, _)| k.clone());
            if let Some(k) = fullest {
                state.buckets.remove(&k);
            }
        }
    }

    /// Takes one delivery token of `tenant` now; `Err(wait)` when the tenant is limited. The
    /// adapter calls this before `begin_write` and answers `Defer { until: wait }` on `Err`.
    pub fn try_acquire(&self, tenant: &str) -> Result<(), Duration> {
        self.try_acquire_at(tenant, Instant::now())
    }

    /// [`try_acquire`](Self::try_acquire) at `now`.
    pub fn try_acquire_at(&self, tenant: &str, now: Instant) -> Result<(), Duration> {
        if !self.policy.rate_per_s.is_finite() {
            return Ok(());
        }
        self.with_state(|state| {
            let bucket = self.bucket(state, tenant, now);
            let (bucket, result) = take_one(bucket, self.policy, now);
            state.buckets.insert(tenant.to_owned(), bucket);
            result
        })
    }

    /// Charges `n` deliveries of `tenant` that a claim already started (see
    /// [`TenantAllowance`]), into debt if need be.
    pub fn charge_at(&self, tenant: &str, n: u32, now: Instant) {
        if !self.policy.rate_per_s.is_finite() || n == 0 {
            return;
        }
        self.with_state(|state| {
            let bucket = self.bucket(state, tenant, now);
            state
                .buckets
                .insert(tenant.to_owned(), charge(bucket, self.policy, n, now));
        });
    }

    /// Who may start how many deliveries at `now`, for the claim (see [`TenantAllowance`]).
    /// Read-only: nothing is taken until the claim is charged. Tenants listed in order of
    /// name, so equal budgets give equal claims.
    pub fn allowance_at(&self, now: Instant) -> TenantAllowance {
        let policy = self.policy;
        let mut tenants: Vec<(String, u32)> = if policy.rate_per_s.is_finite() {
            self.with_state(|state| {
                state
                    .buckets
                    .iter()
                    .map(|(tenant, b)| (tenant, whole_tokens(refill(*b, policy, now))))
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
    fn refill_table() {
        let t0 = Instant::now();
        // (tokens before, ms elapsed, tokens after): 2 tokens a second, never above the burst.
        let rows: [(f64, u64, f64); 7] = [
            (0.0, 0, 0.0),
            (0.0, 250, 0.5),
            (0.0, 500, 1.0),
            (1.5, 1_000, 3.5),
            (3.0, 1_000, 4.0),
            (4.0, 60_000, 4.0),
            (-4.0, 1_000, -2.0),
        ];
        for (before, ms, after) in rows {
            let b = refill(
                Bucket {
                    tokens: before,
                    updated: t0,
                },
                POLICY,
                at(t0, ms),
            );
            assert!(
                (b.tokens - after).abs() < 1e-9,
                "{before} +{ms}ms: {}",
                b.tokens
            );
            assert_eq!(b.updated, at(t0, ms));
        }
        // A clock that runs backwards refills nothing and keeps the bucket's time.
        let b = refill(
            Bucket {
                tokens: 1.0,
                updated: at(t0, 500),
            },
            POLICY,
            t0,
        );
        assert_eq!(
            b,
            Bucket {
                tokens: 1.0,
                updated: at(t0, 500)
            }
        );
    }

    #[test]
    fn take_one_table() {
        let t0 = Instant::now();
        // (tokens before, ms elapsed, taken?, tokens after, wait when refused in ms)
        let rows: [(f64, u64, bool, f64, u64); 6] = [
            (4.0, 0, true, 3.0, 0),
            (1.0, 0, true, 0.0, 0),
            (0.0, 0, false, 0.0, 500),
            (0.5, 0, false, 0.5, 250),
            (0.5, 250, true, 0.0, 0),
            (-2.0, 0, false, -2.0, 1_500),
        ];
        for (before, ms, taken, after, wait_ms) in rows {
            let (b, r) = take_one(
                Bucket {
                    tokens: before,
                    updated: t0,
                },
                POLICY,
                at(t0, ms),
            );
            assert!((b.tokens - after).abs() < 1e-9, "{before}: {}", b.tokens);
            match r {
                Ok(()) => assert!(taken, "{before} +{ms}"),
                Err(wait) => {
                    assert!(!taken, "{before} +{ms}");
                    assert_eq!(wait, Duration::from_millis(wait_ms), "{before} +{ms}");
                }
            }
        }
        let zero = LimitPolicy {
            rate_per_s: 0.0,
            burst: 1,
        };
        let (_, r) = take_one(
            Bucket {
                tokens: 0.0,
                updated: t0,
            },
            zero,
            t0,
        );
        assert_eq!(r, Err(Duration::from_millis(ZERO_RATE_WAIT_MS)));
    }

    #[test]
    fn charge_and_whole_tokens_table() {
        let t0 = Instant::now();
        // (tokens before, charged, tokens after, whole tokens after)
        let rows: [(f64, u32, f64, u32); 6] = [
            (4.0, 0, 4.0, 4),
            (4.0, 1, 3.0, 3),
            (4.0, 4, 0.0, 0),
            (3.5, 1, 2.5, 2),
            (1.0, 3, -2.0, 0),
            (0.0, 100, -4.0, 0),
        ];
        for (before, n, after, whole) in rows {
            let b = charge(
                Bucket {
                    tokens: before,
                    updated: t0,
                },
                POLICY,
                n,
                t0,
            );
            assert!(
                (b.tokens - after).abs() < 1e-9,
                "{before} - {n}: {}",
                b.tokens
            );
            assert_eq!(whole_tokens(b), whole, "{before} - {n}");
        }
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
    fn unlimited_never_limits_or_remembers() {
        let budget = DeliveryBudget::new(LimitPolicy::UNLIMITED, 10);
        let t0 = Instant::now();
        for _ in 0..1_000 {
            assert!(budget.try_acquire_at("a", t0).is_ok());
        }
        budget.charge_at("a", 1_000, t0);
        assert_eq!(budget.tenants(), 0);
        assert_eq!(budget.allowance_at(t0).tenants, vec![]);
    }
}
