//! In-memory token-bucket rate limiters with a bounded number of keys (SPEC §3.4 steps 1 and 3).
//!
//! Owns: a bounded map of buckets ([`Limiter`]) and which bucket a key gets. The bucket arithmetic
//! (refill, burst, all-or-nothing takes, the `Retry-After` wait) is `wharf_core::bucket`'s, shared
//! with the outbound delivery limit. It must not know what a key means or what a request costs:
//! the inbox builds the peer key (client address) and the identity key (tenant, account, device,
//! purpose), and decides where in the pipeline each check runs and how many tokens a request
//! takes.
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

pub use wharf_core::bucket::{Bucket, Denied, LimitPolicy, retry_after_s};

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

    /// Takes one token for `key` now; `Err(retry_after)` when the key is limited.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        self.check_at(key, Instant::now())
    }

    /// Takes one token for `key` at `now` (tests pass their own clock). A policy whose burst is
    /// zero can never hold a token and answers [`wharf_core::bucket::ZERO_RATE_WAIT`].
    pub fn check_at(&self, key: &K, now: Instant) -> Result<(), Duration> {
        self.take_at(key, 1, now).map_err(Denied::wait)
    }

    /// Takes `n` tokens for `key` now, all or nothing.
    pub fn take(&self, key: &K, n: u32) -> Result<(), Denied> {
        self.take_at(key, n, Instant::now())
    }

    /// Takes `n` tokens for `key` at `now`, all or nothing: when the key's bucket cannot cover
    /// `n`, nothing is taken and the answer says how long until it can ([`Denied::Wait`]) or that
    /// it never can ([`Denied::OverBurst`]).
    pub fn take_at(&self, key: &K, n: u32, now: Instant) -> Result<(), Denied> {
        if self.policy.is_unlimited() {
            return Ok(());
        }
        // A poisoned lock only means another thread panicked mid-update of plain numbers; the
        // state is still usable, and refusing every request would be worse.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let stamp = state.next_stamp;
        state.next_stamp += 1;
        let bucket = match state.buckets.get(key) {
            Some(entry) => entry.bucket,
            None => {
                if state.buckets.len() >= self.keys_max {
                    state.evict_one();
                }
                Bucket::full(self.policy, now)
            }
        };
        let (bucket, result) = bucket.take(self.policy, n, now);
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
    fn take_is_per_key_and_all_or_nothing() {
        let limiter = Limiter::new(POLICY, 10);
        let t0 = Instant::now();
        // Three tokens: a batch of four never fits the burst, three fit exactly, and a refused
        // take leaves the tokens for a smaller one.
        assert_eq!(limiter.take_at(&"a", 4, t0), Err(Denied::OverBurst));
        assert_eq!(limiter.take_at(&"a", 1, t0), Ok(()));
        assert_eq!(
            limiter.take_at(&"a", 3, t0),
            Err(Denied::Wait(Duration::from_millis(500)))
        );
        assert_eq!(limiter.take_at(&"a", 2, t0), Ok(()));
        assert_eq!(limiter.check_at(&"a", t0), Err(Duration::from_millis(500)));
        assert_eq!(limiter.take_at(&"b", 3, t0), Ok(()), "b has its own bucket");
        assert_eq!(
            limiter.check_at(&"a", t0 + Duration::from_millis(500)),
            Ok(())
        );
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
            assert!(limiter.take(&i, u32::MAX).is_ok());
        }
        assert_eq!(limiter.keys(), 0);
    }
}
