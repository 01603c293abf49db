//! Short-lived caches of authenticated credentials and verification keys, so the common ingest
//! request does its CPU work without a database round trip before the stream lock.
//!
//! Owns: what is remembered, for how long ([`CACHE_TTL`]), and the bound on memory
//! ([`CACHE_ENTRIES_MAX`] per cache). Must not know what a credential or key is used for.
//!
//! Expired entries are swept out once per TTL, so a cache holds what was read in the last two
//! TTLs, not one entry per producer ever seen: its memory follows the request rate, and
//! 100,000 producers that each send now and then cost what a few thousand busy ones do.
//!
//! A cache may be stale, and nothing that is admitted relies on it: the transaction that commits
//! an envelope reads the credential's and the key's current state again, after taking the
//! stream lock (`group_context.sql`) or in the statement that takes it (a lone envelope,
//! `group_lock_context_one.sql`, which reads again under the lock whenever it waited for another
//! transaction's store), and an audit-only request writes its audit only while its credential
//! is live (`audit_insert.sql`). So a revocation, retirement or removal that has committed is
//! honoured by every ingest transaction whose read began after it: no envelope is admitted by a
//! credential or key whose revocation committed before that read. What the TTL bounds is only
//! how long a refusal decided before the lock may still reflect the old state (a revoked key
//! answered `payload` instead of `signature-revoked-key`, say): at most [`CACHE_TTL`].
//!
//! Unknown tokens and key ids are never remembered: each costs a query, as it did before, and
//! the peer limiter guards that path.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an entry is trusted before it is read again.
pub const CACHE_TTL: Duration = Duration::from_secs(1);
/// Entries per cache at most; a full cache is emptied, so memory stays bounded whatever the
/// number of producers.
pub const CACHE_ENTRIES_MAX: usize = 65_536;

/// A map whose entries expire after `ttl`.
#[derive(Debug)]
pub(crate) struct TtlCache<K, V> {
    entries: Mutex<Entries<K, V>>,
    ttl: Duration,
    max: usize,
}

#[derive(Debug)]
struct Entries<K, V> {
    map: HashMap<K, (V, Instant)>,
    /// When expired entries were last removed.
    swept: Instant,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub(crate) fn new(ttl: Duration, max: usize) -> TtlCache<K, V> {
        TtlCache {
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                swept: Instant::now(),
            }),
            ttl,
            max,
        }
    }

    /// The value and how long ago it was read, while it is fresh.
    pub(crate) fn get(&self, key: &K) -> Option<(V, Duration)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (value, at) = entries.map.get(key)?;
        let age = at.elapsed();
        (age < self.ttl).then(|| (value.clone(), age))
    }

    /// Remembers `value`, read at `at`.
    pub(crate) fn insert(&self, key: K, value: V, at: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if now.duration_since(entries.swept) >= self.ttl {
            let ttl = self.ttl;
            entries
                .map
                .retain(|_, (_, read)| now.duration_since(*read) < ttl);
            // The table keeps the size of its busiest second otherwise.
            let len = entries.map.len();
            if entries.map.capacity() > 4 * len.max(SHRINK_BELOW_ENTRIES) {
                entries.map.shrink_to(2 * len);
            }
            entries.swept = now;
        }
        if entries.map.len() >= self.max && !entries.map.contains_key(&key) {
            entries.map.clear();
        }
        entries.map.insert(key, (value, at));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }
}

/// A swept table smaller than this keeps its allocation: reallocating a few pages each TTL
/// would cost more than it returns.
const SHRINK_BELOW_ENTRIES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_memory_is_bounded() {
        let cache = TtlCache::new(Duration::from_millis(50), 2);
        cache.insert(1, "a", Instant::now());
        assert_eq!(cache.get(&1).map(|(v, _)| v), Some("a"));
        cache.insert(2, "b", Instant::now());
        cache.insert(3, "c", Instant::now());
        assert_eq!(cache.get(&1), None, "a full cache starts over");
        assert_eq!(cache.get(&3).map(|(v, _)| v), Some("c"));
        cache.insert(4, "d", Instant::now() - Duration::from_millis(60));
        assert_eq!(cache.get(&4), None, "expired");
        let off = TtlCache::new(Duration::ZERO, 2);
        off.insert(1, "a", Instant::now());
        assert_eq!(off.len(), 0);
        assert_eq!(off.get(&1), None);
    }

    #[test]
    fn expired_entries_are_swept_once_a_ttl_has_passed() {
        let ttl = Duration::from_millis(200);
        let cache = TtlCache::new(ttl, 1_000);
        let long_ago = Instant::now() - 3 * ttl;
        for key in 0..500 {
            cache.insert(key, "old", long_ago);
        }
        assert_eq!(cache.len(), 500, "no sweep before a TTL has passed");
        std::thread::sleep(ttl);
        cache.insert(1_000, "fresh", Instant::now());
        assert_eq!(
            cache.len(),
            1,
            "the expired entries went, the fresh one stayed"
        );
        assert_eq!(cache.get(&1_000).map(|(v, _)| v), Some("fresh"));
    }
}
