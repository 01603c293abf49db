//! The inbox: signed `controlplane/v1` envelopes in, acknowledgements out (SPEC §3).
//!
//! [`Inbox`] is the service an HTTP layer mounts. [`Inbox::ingest`] (one envelope) and
//! [`Inbox::ingest_batch`] (many envelopes of one stream, one transaction) run SPEC §3.4 in
//! exactly this order, and each step that refuses stops the ones after it:
//!
//! 0. body length (also enforced by the HTTP layer before reading) ⇒ 413, not audited;
//! 1. peer limiter keyed by the client address, or by the broker consumer that delivered the
//!    message ([`Peer`]) ⇒ 429, before any credential work;
//! 2. authenticate the bearer token into a closed [`VerifiedIdentity`] ⇒ 401, not audited;
//! 3. identity limiter keyed by (tenant, account, device, `sync-ingest`), one token per
//!    envelope (see [Batches and the identity limiter](#batches-and-the-identity-limiter))
//!    ⇒ 429, not audited, and no database work after authentication;
//! 4. route: URL tenant = credential tenant = envelope tenant, URL project = envelope project.
//!    An envelope whose route can be read is refused as `route` even when it also fails to
//!    decode (see `decode.rs` for when the route can be read);
//! 5. keys in the verified (tenant, project) scope only, strict Ed25519 verification;
//! 6. `schema_version == 1` — any other version, one above `i64` included, is
//!    `refuse-incompatible` once its signature verifies — and the closed payload schema;
//! 7. lock the stream (tenant, project, producer = device or account) and decide
//!    (`wharf_core::inbox::decide`) against retained identities, the replay floor and the
//!    cursor;
//! 8. commit identities + payloads + cursor walk + redacted audit in one transaction, then
//!    answer. Any database failure answers 503 with nothing acknowledged.
//!
//! Steps 4–6 need no lock, so a batch verifies every signature before it takes the stream lock
//! and writes with one statement per table, never one round trip per envelope.
//!
//! # Group commit and caches
//!
//! Steps 7 and 8 run in the inbox's writer (`group.rs`): requests that reach it while another
//! group is committing — of any streams, single or batch — are joined into one transaction (at
//! most [`GROUP_ENVELOPES_MAX`] envelopes; a lone request is never held back to wait for
//! company), each stream still decided in the order its requests arrived under its lock, and
//! each request answered only after that commit. A group that provably committed nothing is
//! retried one request at a time, so a request that breaks a statement fails alone (503) and
//! a retry of any request is safe. Step 2's credential and step 5's keys come from caches
//! (`cache.rs`, [`CACHE_TTL`]); the commit reads both again after the lock, so a revocation that
//! committed refuses the next envelope it would have admitted: a revoked credential is 401 with
//! nothing written or audited, a revoked or expired key refuses with its `signature-*` reason.
//!
//! # Batches and the identity limiter
//!
//! SPEC §3.4 names one identity limiter for `sync-ingest` and says nothing of batches, so a
//! batch is held to the rate its envelopes would meet one by one: it costs **one token per
//! envelope**, taken all at once or not at all. A batch the bucket cannot cover now is refused
//! as a whole — 429 `identity-limited` with `Retry-After` (whole seconds until the bucket holds
//! that many tokens), exactly as the single endpoint answers — before any route, key, stream or
//! audit work, so nothing is committed, nothing is audited and no token is spent; a smaller
//! batch may pass at once. Splitting an over-limit batch into what fits is left to the
//! producer: a partial accept would acknowledge a prefix of a stream the producer meant as one
//! transaction. A batch of more envelopes than the burst can never be covered, so it is refused
//! with 413 `batch-over-burst` rather than a `Retry-After` that would never come true; the
//! default burst is therefore the default batch maximum. A batch body that is not a list of
//! envelopes is one refused decision and costs one token. The peer limiter (step 1) still
//! counts requests: it guards the credential lookup, which a batch makes once.
//!
//! # Reasons
//!
//! Outcomes and reasons come from one table, `wharf_core::inbox` (its `reason` module lists
//! them). The audit records the exact reason; a response folds the `signature-*` family into
//! `signature`, as SPEC §3.4 asks for distinct *audit* reasons only and a producer gains nothing
//! from learning which of its keys exist. Whole-request answers use `body-too-large`,
//! `batch-over-burst`, `peer-limited`, `identity-limited`, `unauthenticated` and `database`.
//!
//! # Quick start (server side)
//!
//! ```no_run
//! # async fn example(pool: sqlx::PgPool) -> Result<(), wharf::inbox::Error> {
//! use wharf::inbox::{self, Inbox, InboxConfig, Route};
//! inbox::create_tenant(&pool, "acme").await?;
//! let credential = inbox::issue_credential(&pool, "acme", "alice", Some("laptop-1")).await?;
//! let key = inbox::generate_key(&pool, "acme", "web", None, inbox::KEY_REPLAY_WINDOW_DEFAULT).await?;
//! // give credential.token and key.private_seed_base64() to the producer, then:
//! let inbox = Inbox::new(pool, InboxConfig::default());
//! # let body = b"{}";
//! let answer = inbox
//!     .ingest("127.0.0.1".parse().unwrap(), &credential.token, Route::new("acme", "web"), body)
//!     .await;
//! println!("{} {}", answer.status.as_str(), answer.reason);
//! # Ok(()) }
//! ```
//!
//! Must not know: HTTP. Status codes are plain numbers in [`Response`]; the axum routes live in
//! `wharf-http`.

mod cache;
mod credentials;
mod decode;
mod error;
mod group;
#[cfg(feature = "testing")]
pub(crate) use group::BEGIN as GROUP_BEGIN;
mod ingest;
mod keys;
pub mod limiter;
mod response;
mod retention;
mod settings;
pub mod streams;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::PgPool;

pub use crate::held::IDLE_CHECK_AFTER_MS as CONNECTION_IDLE_CHECK_AFTER_MS;
pub use cache::{CACHE_ENTRIES_MAX, CACHE_TTL};
pub use credentials::{
    CredentialInfo, IssuedCredential, TOKEN_PREFIX, VerifiedIdentity, authenticate, create_tenant,
    issue_credential, list_credentials, list_tenants, revoke_credential,
};
pub use error::Error;
pub use group::{GROUP_ENVELOPES_MAX, GROUPS_IN_FLIGHT};
pub use keys::{
    GeneratedKey, KEY_REMOVALS_PER_RUN_MAX, KEY_REPLAY_WINDOW_DEFAULT_S, KeyInfo, KeyUse, add_key,
    generate_key, key_from_base64, key_to_base64, key_usable, list_keys, remove_key,
    remove_safe_keys, retire_key, revoke_key,
};
pub use limiter::{LimitPolicy, Limiter};
pub use response::{BatchResponse, ItemResponse, Original, Response, Status};
pub use retention::{
    HOUSEKEEPING_BATCHES_MAX, HOUSEKEEPING_INTERVAL_MS_DEFAULT, HOUSEKEEPING_INTERVAL_MS_MAX,
    HOUSEKEEPING_INTERVAL_MS_MIN, HOUSEKEEPING_OPERATOR, Housekeeping, HousekeepingReport,
    PAYLOAD_RETENTION_DAYS_MAX, PAYLOAD_RETENTION_DEFAULT, RETENTION_BATCH_MAX,
    delete_expired_payloads, housekeep, housekeeping_loop, run_retention,
};
pub use settings::{InboxSettings, load_schemas};
pub use streams::{Producer, StreamChange, StreamId, StreamInfo};
pub use wharf_core::inbox::Outcome;

use crate::core::envelope::ENVELOPE_BYTES_MAX;
use crate::core::schema::Catalog;

/// [`KEY_REPLAY_WINDOW_DEFAULT_S`] as a `Duration`.
pub const KEY_REPLAY_WINDOW_DEFAULT: Duration = Duration::from_secs(KEY_REPLAY_WINDOW_DEFAULT_S);

/// The limiter purpose SPEC §3.4 step 3 names.
pub const SYNC_INGEST_PURPOSE: &str = "sync-ingest";

/// How an [`Inbox`] is configured. `Default` gives the production defaults below.
#[derive(Debug, Clone)]
pub struct InboxConfig {
    /// Peer limiter (step 1), per client address. Default 200/s, burst 400: far above one
    /// honest producer, low enough that one address cannot keep the credential lookup busy.
    pub peer_limit: LimitPolicy,
    /// Addresses the peer limiter remembers. Default 65,536 (a few MiB).
    pub peer_keys_max: usize,
    /// Peer limiter (step 1) for [`Peer::Consumer`], per broker consumer. A broker carries many
    /// producers, so one consumer is one peer with the traffic of all of them. Default
    /// 20,000/s, burst 20,000: above what one consumer can ingest on a 2-core machine, so it
    /// stops only a runaway, while the consumer's own in-flight bound does the pacing.
    pub consumer_limit: LimitPolicy,
    /// Consumers the peer limiter remembers. Default 1,024: consumers come from configuration,
    /// not from the network.
    pub consumer_keys_max: usize,
    /// Identity limiter (step 3), per (tenant, account, device, `sync-ingest`), in envelopes:
    /// a batch costs one token per envelope (see the module docs). Default 100/s, burst 1,000:
    /// the burst equals the default `batch_envelopes_max`, so a quiet producer may send one full
    /// batch at once (a device back from a day offline sends its backlog as full batches, the
    /// first at once, the rest at the rate); a burst below `batch_envelopes_max` makes larger
    /// batches answer 413 `batch-over-burst`.
    pub identity_limit: LimitPolicy,
    /// Identities the identity limiter remembers. Default 65,536.
    pub identity_keys_max: usize,
    /// Largest single-envelope body. Default [`ENVELOPE_BYTES_MAX`] (2 MiB), the largest legal
    /// envelope; the HTTP layer's body limit must be at least this.
    pub body_bytes_max: usize,
    /// Largest batch body. Default 32 MiB.
    pub batch_body_bytes_max: usize,
    /// Most envelopes in one batch. Default 1,000: one transaction stays short (well under a
    /// second) and one stream lock is not held long.
    pub batch_envelopes_max: usize,
    /// The payload schemas. Default: the 14 built-in v1 types.
    pub catalog: Arc<Catalog>,
}

impl Default for InboxConfig {
    fn default() -> Self {
        InboxConfig {
            peer_limit: LimitPolicy {
                rate_per_s: 200.0,
                burst: 400,
            },
            peer_keys_max: 65_536,
            consumer_limit: LimitPolicy {
                rate_per_s: 20_000.0,
                burst: 20_000,
            },
            consumer_keys_max: 1_024,
            identity_limit: LimitPolicy {
                rate_per_s: 100.0,
                burst: 1000,
            },
            identity_keys_max: 65_536,
            body_bytes_max: ENVELOPE_BYTES_MAX,
            batch_body_bytes_max: 32 * 1024 * 1024,
            batch_envelopes_max: 1000,
            catalog: Arc::new(Catalog::with_builtin()),
        }
    }
}

/// The route an ingest request came in on: `/v1/tenants/{tenant}/projects/{project}/…`. Taken
/// as the caller parsed it; the inbox checks it (step 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The URL's tenant.
    pub tenant: String,
    /// The URL's project.
    pub project: String,
}

impl Route {
    /// A route.
    pub fn new(tenant: impl Into<String>, project: impl Into<String>) -> Route {
        Route {
            tenant: tenant.into(),
            project: project.into(),
        }
    }
}

/// Who delivered a request to the pipeline: the peer limiter's key (step 1), looked at before
/// any credential work.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Peer {
    /// A client address (HTTP): limited per address, IPv6 per /64, with
    /// [`InboxConfig::peer_limit`].
    Address(IpAddr),
    /// A broker consumer (a JetStream durable consumer, named by its stream and consumer): the
    /// broker is the peer, every producer behind it shares it, and it is limited with
    /// [`InboxConfig::consumer_limit`].
    Consumer(Arc<str>),
}

impl From<IpAddr> for Peer {
    fn from(address: IpAddr) -> Peer {
        Peer::Address(address)
    }
}

/// The identity limiter's key: who, and for what purpose.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct IdentityKey {
    identity: VerifiedIdentity,
    purpose: &'static str,
}

/// How far requests got through the pipeline, counted since the inbox was built. A test hook
/// and a cheap health signal: e.g. a limited peer must not raise `authentications`, and a
/// limited identity must not raise `key_lookups` or `stream_transactions`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxCounters {
    /// Credential verifications started (step 2).
    pub authentications: u64,
    /// Key lookups (step 5; one per request).
    pub key_lookups: u64,
    /// Transactions that locked a stream (step 7), or tried to: a lone envelope's
    /// one-statement store counts even when it found the stream other than presumed (and
    /// wrote nothing), and so does the ordinary transaction that decides it then.
    pub stream_transactions: u64,
    /// Audit writes (one per request that reached a decision).
    pub audit_writes: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    authentications: AtomicU64,
    key_lookups: AtomicU64,
    stream_transactions: AtomicU64,
    audit_writes: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The inbox service. Cheap to share: wrap it in an `Arc` and hand it to every request.
#[derive(Debug)]
pub struct Inbox {
    pool: PgPool,
    config: InboxConfig,
    peer_limiter: Limiter<IpAddr>,
    consumer_limiter: Limiter<Arc<str>>,
    identity_limiter: Limiter<IdentityKey>,
    counters: Arc<Counters>,
    /// Live credentials by token digest: (credential id, identity).
    credentials: cache::TtlCache<[u8; 32], (i64, VerifiedIdentity)>,
    /// Verification keys by (tenant, project, key id).
    keys: cache::TtlCache<(String, String, String), crate::store::inbox::VerifyKeyRow>,
    /// Steps 7 and 8, for every request with something to decide on its stream.
    writer: group::Writer,
}

impl Inbox {
    /// An inbox on `pool` (migrated with [`crate::migrate::run`]).
    pub fn new(pool: PgPool, config: InboxConfig) -> Inbox {
        let identity = config.identity_limit;
        if !identity.is_unlimited()
            && usize::try_from(identity.burst).is_ok_and(|burst| burst < config.batch_envelopes_max)
        {
            // Allowed (an operator may want small bursts and producers that send small
            // batches), but a producer that fills a batch to the maximum gets 413.
            tracing::warn!(
                identity_burst = identity.burst,
                batch_envelopes_max = config.batch_envelopes_max,
                "inbox identity burst is below the batch maximum: larger batches are refused with 413 batch-over-burst"
            );
        }
        let counters = Arc::new(Counters::default());
        Inbox {
            peer_limiter: Limiter::new(config.peer_limit, config.peer_keys_max),
            consumer_limiter: Limiter::new(config.consumer_limit, config.consumer_keys_max),
            identity_limiter: Limiter::new(config.identity_limit, config.identity_keys_max),
            credentials: cache::TtlCache::new(CACHE_TTL, CACHE_ENTRIES_MAX),
            keys: cache::TtlCache::new(CACHE_TTL, CACHE_ENTRIES_MAX),
            writer: group::Writer::new(pool.clone(), Arc::clone(&counters)),
            pool,
            config,
            counters,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &InboxConfig {
        &self.config
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Pipeline counters so far.
    pub fn counters(&self) -> InboxCounters {
        let c = &self.counters;
        InboxCounters {
            authentications: c.authentications.load(Ordering::Relaxed),
            key_lookups: c.key_lookups.load(Ordering::Relaxed),
            stream_transactions: c.stream_transactions.load(Ordering::Relaxed),
            audit_writes: c.audit_writes.load(Ordering::Relaxed),
        }
    }
}

/// A fresh correlation id: 128 random bits as 32 hex digits. Random, not sequential, so ids
/// from different replicas never collide and reveal nothing about volume.
pub fn new_correlation_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}
