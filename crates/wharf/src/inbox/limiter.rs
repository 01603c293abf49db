//! In-memory token-bucket rate limiters with a bounded number of keys (SPEC §3.4 steps 1 and 3).
//!
//! Owns: the bucket arithmetic ([`take`], a pure function of the bucket, the policy and `now`, so
//! it is tested without sleeping) and a bounded map of buckets ([`Limiter`]). It must not know
//! what a key means: the inbox builds the peer key (client address) and the identity key
//! (tenant, account, device, purpose) and decides where in the pipeline each check runs.
//!
//! Why in memory: these limits protect this process's CPU and database pool from one client;
//! they are not a billing quota. Each replica limits on its own, so a deployment with N replicas
//! admits up to N times the rate in total; set the rate per replica.
//!
//! Why bounded: the peer limiter is keyed by whatever address connects, so an attacker with many
//! addresses could grow an unbounded map without end. When the map is full the least recently
//! used key is evicted; an evicted key starts again with a full bucket, which is the price of the
//! bound (the evicted client was the quietest one).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How fast a bucket refills and how much it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitPolicy {
    /// Tokens added per second (sustained requests per second).
    pub rate_per_s: f64,
    /// Largest number of tokens a bucket holds (the burst a quiet client may send at once).
    pub burst: u32,
}

impl LimitPolicy {
    /// A policy that never limits (for tests and trusted deployments).
    pub const UNLIMITED: LimitPolicy = LimitPolicy {
        rate_per_s: f64::INFINITY,
        burst: u32::MAX,
    };
}

/// One key's bucket: tokens left at `updated`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Tokens left, at most the policy's burst.
    pub tokens: f64,
    /// When `tokens` was computed.
    pub updated: Instant,
}

impl Bucket {
    /// A full bucket at `now`: a key seen for the first time may send its burst.
    pub fn full(policy: LimitPolicy, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(policy.burst),
            updated: now,
        }
    }
}

/// Takes one token from `bucket` at `now` under `policy`.
///
/// Returns the bucket after the attempt and `Ok(())` when the token was there, or
/// `Err(retry_after)` with how long until one will be. A clock that went backwards (an `Instant`
/// earlier than `updated`) refills nothing rather than panicking.
pub fn take(bucket: Bucket, policy: LimitPolicy, now: Instant) -> (Bucket, Result<(), Duration>) {
    if !policy.rate_per_s.is_finite() {
        return (
            Bucket {
                tokens: f64::from(policy.burst),
                updated: now,
            },
            Ok(()),
        );
    }
    let elapsed_s = now.saturating_duration_since(bucket.updated).as_secs_f64();
    let tokens = (bucket.tokens + elapsed_s * policy.rate_per_s).min(f64::from(policy.burst));
    let updated = if now > bucket.updated {
        now
    } else {
        bucket.updated
    };
    if tokens >= 1.0 {
        return (
            Bucket {
                tokens: tokens - 1.0,
                updated,
            },
            Ok(()),
        );
    }
    let missing = 1.0 - tokens;
    let retry_after = if policy.rate_per_s > 0.0 {
        Duration::from_secs_f64(missing / policy.rate_per_s)
    } else {
        // A zero rate never refills: tell the client to come back much later rather than never.
        Duration::from_secs(3600)
    };
    (Bucket { tokens, updated }, Err(retry_after))
}

/// Whole seconds for a `Retry-After` header: rounded up and at least 1, so a client that obeys
/// it never arrives before its token.
pub fn retry_after_s(retry_after: Duration) -> u64 {
    let s = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    s.max(1)
}

struct Entry {
    bucket: Bucket,
    /// The touch that last used this key; matches one element of `order`.
    stamp: u64,
}

struct State<K> {
    buckets: HashMap<K, Entry>,
    /// Keys in the order they were touched, with the stamp of that touch. A key touched again
    /// gets a newer element; older elements for it are stale and skipped (lazy deletion keeps a
    /// touch O(1)). Compacted when it grows past twice the key bound.
    order: VecDeque<(K, u64)>,
    next_stamp: u64,
}

/// A token-bucket limiter over keys `K`, holding at most `keys_max` buckets.
pub struct Limiter<K> {
    policy: LimitPolicy,
    keys_max: usize,
    state: Mutex<State<K>>,
}

impl<K: Hash + Eq + Clone> Limiter<K> {
    /// A limiter with `policy` for every key and room for `keys_max` keys (at least 1).
    pub fn new(policy: LimitPolicy, keys_max: usize) -> Limiter<K> {
        Limiter {
            policy,
            keys_max: keys_max.max(1),
            state: Mutex::new(State {
                buckets: HashMap::new(),
                order: VecDeque::new(),
                next_stamp: 0,
            }),
        }
    }

    /// The policy.
    pub fn policy(&self) -> LimitPolicy {
        self.policy
    }

    /// Takes a token for `key` now; `Err(retry_after)` when the key is limited.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        self.check_at(key, Instant::now())
    }

    /// Takes a token for `key` at `now` (tests pass their own clock).
    pub fn check_at(&self, key: &K, now: Instant) -> Result<(), Duration> {
        if !self.policy.rate_per_s.is_finite() {
            return Ok(());
        }
        // A poisoned lock only means another thread panicked mid-update of plain numbers; the
        // state is still usable, and refusing every request would be worse.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let stamp = state.next_stamp;
        state.next_stamp += 1;
        let (bucket, result) = match state.buckets.get(key) {
            Some(entry) => take(entry.bucket, self.policy, now),
            None => {
                if state.buckets.len() >= self.keys_max {
                    state.evict_one();
                }
                take(Bucket::full(self.policy, now), self.policy, now)
            }
        };
        state.buckets.insert(key.clone(), Entry { bucket, stamp });
        state.order.push_back((key.clone(), stamp));
        if state.order.len() > 2 * self.keys_max {
            state.compact();
        }
        result
    }

    /// How many keys hold a bucket now.
    pub fn keys(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .buckets
            .len()
    }
}

impl<K: Hash + Eq + Clone> State<K> {
    /// Removes the least recently touched key.
    fn evict_one(&mut self) {
        while let Some((key, stamp)) = self.order.pop_front() {
            if self.buckets.get(&key).is_some_and(|e| e.stamp == stamp) {
                self.buckets.remove(&key);
                return;
            }
        }
    }

    /// Drops stale elements of `order`, leaving one per live key.
    fn compact(&mut self) {
        let buckets = &self.buckets;
        self.order
            .retain(|(key, stamp)| buckets.get(key).is_some_and(|e| e.stamp == *stamp));
    }
}

impl<K> std::fmt::Debug for Limiter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("policy", &self.policy)
            .field("keys_max", &self.keys_max)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: LimitPolicy = LimitPolicy {
        rate_per_s: 2.0,
        burst: 3,
    };

    #[test]
    fn bucket_arithmetic() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut b = Bucket::full(POLICY, t0);
        // The burst passes at once, then the next waits for half a second's refill.
        for _ in 0..3 {
            let (nb, r) = take(b, POLICY, t0);
            assert_eq!(r, Ok(()));
            b = nb;
        }
        let (nb, r) = take(b, POLICY, t0);
        assert_eq!(r, Err(Duration::from_millis(500)));
        b = nb;
        let (nb, r) = take(b, POLICY, at(250));
        assert_eq!(r, Err(Duration::from_millis(250)));
        b = nb;
        let (nb, r) = take(b, POLICY, at(500));
        assert_eq!(r, Ok(()));
        b = nb;
        // A long idle period refills only up to the burst.
        let (nb, _) = take(b, POLICY, at(100_000));
        assert!((nb.tokens - 2.0).abs() < 1e-9, "{}", nb.tokens);
        // A clock going backwards refills nothing and does not panic.
        let (nb2, r) = take(nb, POLICY, at(1));
        assert_eq!(r, Ok(()));
        assert_eq!(nb2.updated, nb.updated);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_s(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_s(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_s(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_s(Duration::ZERO), 1);
    }

    #[test]
    fn keys_are_bounded_and_the_least_recent_goes() {
        let limiter = Limiter::new(
            LimitPolicy {
                rate_per_s: 0.001,
                burst: 1,
            },
            3,
        );
        let t = Instant::now();
        assert!(limiter.check_at(&"a", t).is_ok());
        assert!(limiter.check_at(&"b", t).is_ok());
        assert!(limiter.check_at(&"c", t).is_ok());
        // "a" is touched again (and limited), so "b" is now the least recent.
        assert!(limiter.check_at(&"a", t).is_err());
        assert!(limiter.check_at(&"d", t).is_ok());
        assert_eq!(limiter.keys(), 3);
        assert!(
            limiter.check_at(&"a", t).is_err(),
            "a kept its empty bucket"
        );
        assert!(
            limiter.check_at(&"b", t).is_ok(),
            "b was evicted and starts full"
        );
        // Many touches of few keys never grow the order queue without bound.
        for _ in 0..1000 {
            let _ = limiter.check_at(&"a", t);
        }
        assert!(limiter.state.lock().unwrap().order.len() <= 6);
    }

    #[test]
    fn unlimited_never_limits() {
        let limiter = Limiter::new(LimitPolicy::UNLIMITED, 1);
        for i in 0..100 {
            assert!(limiter.check(&i).is_ok());
        }
        assert_eq!(limiter.keys(), 0);
    }
}
