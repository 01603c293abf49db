//! The ingest pipeline (SPEC §3.4) behind [`Inbox::ingest`] and [`Inbox::ingest_batch`].
//!
//! Owns: the order of the steps, what a request costs at the identity limiter, and the one
//! transaction per request. Must not know HTTP, and holds no rule of its own: signatures,
//! schemas, refusals, outcomes, reasons and the cursor walk come from `wharf_core` (its `inbox`
//! module is the one table of outcomes), decoding and the envelope's route from
//! [`super::decode`], key state from [`super::keys::key_usable`], limits from
//! [`super::limiter`], SQL from [`crate::store::inbox`].
//!
//! Both endpoints share one path: a single envelope is a batch of one. What differs is only the
//! shape of the answer, what the request costs at the identity limiter (one token per envelope,
//! see the [module docs](super)), and that a batch does its CPU work (decoding, verification,
//! schema validation, digests) on blocking threads, split across the machine's cores, before it
//! takes the stream lock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;
use serde_json::value::RawValue;
use wharf_core::envelope::{Envelope, is_identity};
use wharf_core::inbox::{self as rules, Decision, Refusal};
use wharf_core::schema::Catalog;

use super::decode::{self, Decoded, VerifiedRoute};
use super::group::{Answered, Job};
use super::keys::{KeyUse, key_usable};
use super::limiter::{Denied, retry_after_s};
use super::response::{BatchResponse, ItemResponse, Original, Response, Status};
use super::{
    IdentityKey, Inbox, Peer, Route, SYNC_INGEST_PURPOSE, VerifiedIdentity, bump,
    new_correlation_id,
};
use crate::commit::CommitError;
use crate::store::inbox::{self as store, AuditBatch, AuditScope, VerifyKeyRow};

/// Batches at least this long do their CPU work on blocking threads. Below it the hand-off costs
/// more than it saves, and a single envelope (~0.1 ms of work) stays on the async thread.
const BLOCKING_ENVELOPES_MIN: usize = 16;

/// One envelope's way through the pipeline.
pub(super) enum Item {
    /// Decoded and routed; waiting for its key.
    Decoded(Box<Decoded>),
    /// Verified and valid; waiting for the stream decision.
    Candidate(Box<Candidate>),
    /// Decided: refused before the lock, or decided on the stream.
    Done(Done),
}

pub(super) struct Candidate {
    pub envelope: Envelope,
    pub digest: [u8; 32],
    pub payload_text: String,
    /// The public key it verified with, so the commit can tell the key was not replaced.
    pub public_key: [u8; 32],
}

/// A finished item.
#[derive(Clone)]
pub(super) struct Done {
    pub decision: Decision,
    pub event_id: Option<String>,
    pub sequence: Option<u64>,
    pub original: Option<Original>,
}

impl Done {
    pub(super) fn refused(refusal: Refusal, envelope: &Envelope) -> Done {
        Done {
            decision: refusal.decision(),
            event_id: Some(envelope.event_id.clone()),
            sequence: Some(envelope.producer_sequence),
            original: None,
        }
    }
}

impl Item {
    fn refused(refusal: Refusal, envelope: Option<&Envelope>) -> Item {
        Item::Done(Done {
            decision: refusal.decision(),
            event_id: envelope.map(|e| e.event_id.clone()),
            sequence: envelope.map(|e| e.producer_sequence),
            original: None,
        })
    }

    /// The finished answer. Every item is finished before the pipeline answers; an unfinished
    /// one would be a bug, and refusing it (without storing) is the safe answer.
    fn done(self) -> Done {
        match self {
            Item::Done(done) => done,
            Item::Decoded(d) => Done {
                decision: Refusal::Payload.decision(),
                event_id: Some(d.envelope.event_id.clone()),
                sequence: Some(d.envelope.producer_sequence),
                original: None,
            },
            Item::Candidate(c) => Done {
                decision: Refusal::Payload.decision(),
                event_id: Some(c.envelope.event_id.clone()),
                sequence: Some(c.envelope.producer_sequence),
                original: None,
            },
        }
    }
}

/// The peer limiter's key for an address. An IPv6 client usually holds a whole /64 and can send
/// from any address in it, so IPv6 peers are limited per /64 (and an IPv4-mapped address as
/// the IPv4 address it is); otherwise one client could rotate through fresh buckets and evict
/// everyone else's.
pub(crate) fn peer_key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !u128::from(u64::MAX),
            )),
        },
    }
}

/// Counts one answer in the `metrics` facade: `wharf_inbox_answers_total{status, outcome,
/// reason}` (the binary exports it to Prometheus). Reasons and outcomes are closed sets, so the
/// label cardinality is bounded.
fn count(status: &'static str, outcome: &'static str, reason: &'static str) {
    metrics::counter!(
        "wharf_inbox_answers_total",
        "status" => status,
        "outcome" => outcome,
        "reason" => reason
    )
    .increment(1);
}

/// Counts a whole-request refusal and hands it back. 503 is counted where it is made
/// ([`Inbox::unavailable`]).
fn counted(answer: Response) -> Response {
    if answer.status != Status::Unavailable {
        count(answer.status.as_str(), "none", answer.reason);
    }
    answer
}

/// The closed batch body: `{"envelopes": [ … ]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    envelopes: Vec<Box<RawValue>>,
}

/// Step 4 (the envelope half) and decoding: an envelope whose route matches, or a refusal
/// ([`decode::decode_and_route`] says which when both fail).
fn decode_and_route(route: VerifiedRoute<'_>, body: &[u8]) -> Item {
    match decode::decode_and_route(route, body) {
        Ok(decoded) => Item::Decoded(Box::new(decoded)),
        Err(undecoded) => Item::refused(undecoded.refusal, undecoded.envelope.as_deref()),
    }
}

/// A key found for one request, its point decompressed once for all the request's envelopes:
/// decompressing it costs about a third of a verification, and a profile of the batch endpoint
/// showed it paid per envelope.
struct ParsedKey {
    row: VerifyKeyRow,
    /// `None` for a row whose bytes are not a valid point (the table only holds keys that
    /// parsed when added, so a broken row is treated as unknown).
    verifying: Option<VerifyingKey>,
}

impl ParsedKey {
    fn new(row: VerifyKeyRow) -> ParsedKey {
        let verifying = <[u8; 32]>::try_from(row.public_key.as_slice())
            .ok()
            .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok());
        ParsedKey { row, verifying }
    }
}

/// Steps 5 and 6 for one decoded envelope, given the keys found in the verified scope.
fn verify_and_validate(
    decoded: Decoded,
    keys: &HashMap<String, ParsedKey>,
    catalog: &Catalog,
) -> Item {
    let refused = |refusal: Refusal, envelope: &Envelope| Item::refused(refusal, Some(envelope));
    let envelope = &decoded.envelope;
    let Some(ParsedKey {
        row: key,
        verifying,
    }) = keys.get(&envelope.integrity.key_id)
    else {
        return refused(Refusal::SignatureUnknownKey, envelope);
    };
    match key_usable(
        &key.state,
        key.retired_at,
        key.replay_window_seconds,
        key.now,
    ) {
        KeyUse::Usable => {}
        KeyUse::Revoked => return refused(Refusal::SignatureRevokedKey, envelope),
        KeyUse::RetiredPastWindow => return refused(Refusal::SignatureRetiredKey, envelope),
    }
    let Some(verifying) = verifying else {
        return refused(Refusal::SignatureUnknownKey, envelope);
    };
    if let Err(refusal) = decode::verify(&decoded, verifying) {
        return refused(refusal, envelope);
    }
    // A version above i64 decoded as a stand-in that is not 1, so it is refused here.
    if let Err(refusal) = rules::check_schema_version(envelope.schema_version) {
        return refused(refusal, envelope);
    }
    if let Err(e) = catalog.validate(&envelope.event_type, &envelope.payload) {
        return refused(rules::refusal_for_schema_error(&e), envelope);
    }
    let (Ok(digest), Ok(payload)) = (envelope.content_digest(), envelope.payload_canonical())
    else {
        // A decoded envelope always has a canonical form; refuse rather than panic if not.
        return refused(Refusal::Payload, envelope);
    };
    let Ok(payload_text) = String::from_utf8(payload) else {
        return refused(Refusal::Payload, envelope);
    };
    Item::Candidate(Box::new(Candidate {
        envelope: decoded.envelope,
        digest,
        payload_text,
        public_key: verifying.to_bytes(),
    }))
}

/// The cores batches are split across, asked once: on Linux `available_parallelism` reads the
/// cgroup files each time (five system calls per file), which a profile of the batch endpoint
/// showed as thousands of `openat`/`read`/`statx` per second.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runs `f` over `items`, on blocking threads split across the cores when there are many.
async fn cpu_map<T, U, F>(items: Vec<T>, f: F) -> Vec<U>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> U + Send + Sync + 'static,
{
    if items.len() < BLOCKING_ENVELOPES_MIN {
        return items.into_iter().map(f).collect();
    }
    let parallel = cores();
    let chunk = items.len().div_ceil(parallel);
    let f = Arc::new(f);
    let mut items = items;
    let mut tasks = Vec::with_capacity(parallel);
    while !items.is_empty() {
        let rest = items.split_off(chunk.min(items.len()));
        let part = std::mem::replace(&mut items, rest);
        let f = Arc::clone(&f);
        tasks.push(tokio::task::spawn_blocking(move || {
            part.into_iter().map(|t| f(t)).collect::<Vec<U>>()
        }));
    }
    let mut out = Vec::new();
    for task in tasks {
        match task.await {
            Ok(part) => out.extend(part),
            // A panic in pure checking code is a bug; surface it rather than answer for the
            // envelopes it dropped.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out
}

/// What the stream answered, for every item.
pub(super) struct Decided {
    pub items: Vec<Item>,
    pub acknowledged_sequence: u64,
}

impl Inbox {
    /// Ingests one envelope: SPEC §3.4 from the body limit to the answer. Never fails: every
    /// failure is an answer (401, 413, 429, 503, or an outcome); see [`Response`].
    pub async fn ingest(&self, peer: IpAddr, bearer: &str, route: Route, body: &[u8]) -> Response {
        self.ingest_correlated(new_correlation_id(), peer, bearer, route, body)
            .await
    }

    /// [`Inbox::ingest`] under the caller's correlation id (an HTTP layer passes the one it
    /// echoes in its response header, so header, body and audit row agree). The id is recorded
    /// in the audit as given; pass a bounded, printable one.
    pub async fn ingest_correlated(
        &self,
        correlation_id: String,
        peer: IpAddr,
        bearer: &str,
        route: Route,
        body: &[u8],
    ) -> Response {
        self.ingest_from(correlation_id, Peer::Address(peer), bearer, route, body)
            .await
    }

    /// [`Inbox::ingest_correlated`] for any [`Peer`]: a broker consumer (JetStream) passes
    /// itself, so the peer limiter keys on the consumer. The one path every single envelope
    /// takes, whatever carried it.
    pub async fn ingest_from(
        &self,
        correlation_id: String,
        peer: Peer,
        bearer: &str,
        route: Route,
        body: &[u8],
    ) -> Response {
        let identity = match self
            .admit(
                peer,
                bearer,
                body.len(),
                self.config.body_bytes_max,
                &correlation_id,
            )
            .await
            .and_then(|(credential_id, identity)| {
                self.limit_identity(identity, 1, &correlation_id)
                    .map(|identity| (credential_id, identity))
            }) {
            Ok(admitted) => admitted,
            Err(answer) => return answer,
        };
        match self
            .decide_all(identity, route, vec![body.to_vec()], &correlation_id)
            .await
        {
            Ok(Answered::Unauthenticated) => counted(Response::bare(
                Status::Unauthenticated,
                "unauthenticated",
                correlation_id,
            )),
            Ok(Answered::Decided(decided)) => {
                let done = decided
                    .items
                    .into_iter()
                    .next()
                    .map(Item::done)
                    .unwrap_or_else(|| Item::refused(Refusal::Payload, None).done());
                Response {
                    status: Status::Outcome(done.decision.outcome),
                    reason: done.decision.response_reason(),
                    correlation_id,
                    acknowledged_sequence: Some(decided.acknowledged_sequence),
                    retry_after_s: None,
                    original: done.original,
                }
            }
            Err(e) => self.unavailable(&e, correlation_id),
        }
    }

    /// Ingests many envelopes of one stream (the body is `{"envelopes": [ … ]}`) in one
    /// transaction, answering one outcome per envelope plus the stream's cursor.
    pub async fn ingest_batch(
        &self,
        peer: IpAddr,
        bearer: &str,
        route: Route,
        body: &[u8],
    ) -> BatchResponse {
        self.ingest_batch_correlated(new_correlation_id(), peer, bearer, route, body)
            .await
    }

    /// [`Inbox::ingest_batch`] under the caller's correlation id.
    pub async fn ingest_batch_correlated(
        &self,
        correlation_id: String,
        peer: IpAddr,
        bearer: &str,
        route: Route,
        body: &[u8],
    ) -> BatchResponse {
        self.ingest_batch_from(correlation_id, Peer::Address(peer), bearer, route, body)
            .await
    }

    /// [`Inbox::ingest_batch_correlated`] for any [`Peer`] (a broker consumer commits the
    /// messages of one producer that arrived together as one batch).
    pub async fn ingest_batch_from(
        &self,
        correlation_id: String,
        peer: Peer,
        bearer: &str,
        route: Route,
        body: &[u8],
    ) -> BatchResponse {
        let whole = |head: Response| BatchResponse {
            head,
            items: Vec::new(),
        };
        let identity = match self
            .admit(
                peer,
                bearer,
                body.len(),
                self.config.batch_body_bytes_max,
                &correlation_id,
            )
            .await
        {
            Ok(identity) => identity,
            Err(answer) => return whole(answer),
        };
        // Only the list's shape is read here (each envelope stays raw text): the identity
        // limiter needs its length, and reading it is CPU on a body already within its limit,
        // not route, key, signature or database work.
        let bodies = match serde_json::from_slice::<BatchBody>(body) {
            Ok(batch)
                if batch.envelopes.is_empty()
                    || batch.envelopes.len() > self.config.batch_envelopes_max =>
            {
                Err(Refusal::Payload)
            }
            Ok(batch) => Ok(batch.envelopes),
            Err(_) => Err(Refusal::Payload),
        };
        // Step 3: one token per envelope, so a batch never outruns the per-identity rate that
        // the same envelopes sent one by one would meet. A body that is not such a list is one
        // refused decision and costs one token, like a single envelope.
        let cost = bodies.as_ref().map_or(1, Vec::len);
        let (credential_id, identity) = identity;
        let identity = match self.limit_identity(identity, cost, &correlation_id) {
            Ok(identity) => (credential_id, identity),
            Err(answer) => return whole(answer),
        };
        let bodies = match bodies {
            Ok(bodies) => bodies,
            Err(refusal) => {
                // An authenticated request that is not a bounded list of envelopes is one
                // refused decision: audited once, nothing else written.
                let decision = refusal.decision();
                let item = Item::refused(refusal, None);
                return match self
                    .audit_only(&identity, &route, vec![item], &correlation_id)
                    .await
                {
                    Ok(Answered::Unauthenticated) => whole(counted(Response::bare(
                        Status::Unauthenticated,
                        "unauthenticated",
                        correlation_id,
                    ))),
                    Ok(Answered::Decided(decided)) => whole(Response {
                        acknowledged_sequence: Some(decided.acknowledged_sequence),
                        ..Response::bare(
                            Status::Outcome(decision.outcome),
                            decision.response_reason(),
                            correlation_id,
                        )
                    }),
                    Err(e) => whole(self.unavailable(&e, correlation_id)),
                };
            }
        };
        let bodies: Vec<Vec<u8>> = bodies
            .into_iter()
            .map(|raw| {
                let raw: Box<str> = raw.into();
                raw.into_boxed_bytes().into_vec()
            })
            .collect();
        match self
            .decide_all(identity, route, bodies, &correlation_id)
            .await
        {
            Ok(Answered::Unauthenticated) => whole(counted(Response::bare(
                Status::Unauthenticated,
                "unauthenticated",
                correlation_id,
            ))),
            Ok(Answered::Decided(decided)) => BatchResponse {
                head: Response {
                    acknowledged_sequence: Some(decided.acknowledged_sequence),
                    ..Response::bare(Status::Decided, "batch", correlation_id)
                },
                items: decided
                    .items
                    .into_iter()
                    .enumerate()
                    .map(|(index, item)| {
                        let done = item.done();
                        ItemResponse {
                            index,
                            outcome: done.decision.outcome,
                            reason: done.decision.response_reason(),
                            event_id: done.event_id,
                            producer_sequence: done.sequence,
                            original: done.original,
                        }
                    })
                    .collect(),
            },
            Err(e) => whole(self.unavailable(&e, correlation_id)),
        }
    }

    /// Steps 0–2 (see [`Inbox::admit_uncounted`]), with every refusal counted.
    async fn admit(
        &self,
        peer: Peer,
        bearer: &str,
        body_bytes: usize,
        body_bytes_max: usize,
        correlation_id: &str,
    ) -> Result<(i64, VerifiedIdentity), Response> {
        self.admit_uncounted(peer, bearer, body_bytes, body_bytes_max, correlation_id)
            .await
            .map_err(counted)
    }

    /// Steps 0–2: body length, peer limiter, authentication. The peer limiter takes one token
    /// per request whatever it holds: it guards the credential lookup, which a request makes
    /// once, and it runs before the body is read. A live credential is remembered for
    /// [`super::cache::CACHE_TTL`]; the commit checks it again (see [`super::cache`]).
    async fn admit_uncounted(
        &self,
        peer: Peer,
        bearer: &str,
        body_bytes: usize,
        body_bytes_max: usize,
        correlation_id: &str,
    ) -> Result<(i64, VerifiedIdentity), Response> {
        let bare = |status, reason| Response::bare(status, reason, correlation_id.to_owned());
        if body_bytes > body_bytes_max {
            return Err(bare(Status::TooLarge, "body-too-large"));
        }
        let limited = match &peer {
            Peer::Address(address) => self.peer_limiter.check(&peer_key(*address)),
            Peer::Consumer(consumer) => self.consumer_limiter.check(consumer),
        };
        if let Err(wait) = limited {
            return Err(Response {
                retry_after_s: Some(retry_after_s(wait)),
                ..bare(Status::RateLimited, "peer-limited")
            });
        }
        bump(&self.counters.authentications);
        let Some(digest) = super::credentials::token_digest(bearer) else {
            return Err(bare(Status::Unauthenticated, "unauthenticated"));
        };
        if let Some((admitted, _)) = self.credentials.get(&digest) {
            return Ok(admitted);
        }
        let read_at = Instant::now();
        match super::credentials::authenticate_digest(&self.pool, &digest).await {
            Ok(Some(admitted)) => {
                self.credentials.insert(digest, admitted.clone(), read_at);
                Ok(admitted)
            }
            Ok(None) => Err(bare(Status::Unauthenticated, "unauthenticated")),
            Err(e) => {
                Err(self.unavailable(&CommitError::before_commit(e), correlation_id.to_owned()))
            }
        }
    }

    /// Step 3: the identity limiter takes `cost` tokens (one per envelope) at once, or none.
    /// A request the bucket cannot cover now is 429 with the wait until it can; one it can never
    /// cover (more envelopes than the burst) is 413 `batch-over-burst`, since no wait helps and
    /// a client told to retry would retry forever. Neither is audited, and neither spends a
    /// token. Refusals are counted.
    fn limit_identity(
        &self,
        identity: VerifiedIdentity,
        cost: usize,
        correlation_id: &str,
    ) -> Result<VerifiedIdentity, Response> {
        let bare = |status, reason| Response::bare(status, reason, correlation_id.to_owned());
        let key = IdentityKey {
            identity,
            purpose: SYNC_INGEST_PURPOSE,
        };
        // A batch is bounded by `batch_envelopes_max`; a count past u32 is past any burst.
        let tokens = u32::try_from(cost).unwrap_or(u32::MAX);
        match self.identity_limiter.take(&key, tokens) {
            Ok(()) => Ok(key.identity),
            Err(Denied::OverBurst) if tokens > 1 => {
                Err(counted(bare(Status::TooLarge, "batch-over-burst")))
            }
            Err(denied) => Err(counted(Response {
                retry_after_s: Some(retry_after_s(denied.wait())),
                ..bare(Status::RateLimited, "identity-limited")
            })),
        }
    }

    fn unavailable(&self, e: &CommitError, correlation_id: String) -> Response {
        // The error text may name a constraint or a connection problem, never envelope content:
        // every value reaches PostgreSQL as a bind parameter, which errors do not echo.
        count(Status::Unavailable.as_str(), "none", "database");
        tracing::warn!(%correlation_id, error = %e, "inbox request failed; answered 503, nothing acknowledged");
        Response::bare(Status::Unavailable, "database", correlation_id)
    }

    /// Steps 4–8 for every body of one request.
    async fn decide_all(
        &self,
        (credential_id, identity): (i64, VerifiedIdentity),
        route: Route,
        bodies: Vec<Vec<u8>>,
        correlation_id: &str,
    ) -> Result<Answered, CommitError> {
        // Step 4, the URL half: the route must name the credential's tenant and a valid project.
        // Checked before decoding because it needs no body at all.
        let route_ok = route.tenant == identity.tenant()
            && is_identity(&route.tenant)
            && is_identity(&route.project);
        let items: Vec<Item> = if route_ok {
            let route = route.clone();
            cpu_map(bodies, move |body| {
                let verified = VerifiedRoute {
                    tenant: &route.tenant,
                    project: &route.project,
                };
                decode_and_route(verified, &body)
            })
            .await
        } else {
            bodies
                .iter()
                .map(|_| Item::refused(Refusal::Route, None))
                .collect()
        };

        // Step 5: the keys the envelopes name, in the verified scope only.
        let mut key_ids: Vec<&str> = items
            .iter()
            .filter_map(|item| match item {
                Item::Decoded(d) => Some(d.envelope.integrity.key_id.as_str()),
                _ => None,
            })
            .collect();
        key_ids.sort_unstable();
        key_ids.dedup();
        let keys = if key_ids.is_empty() {
            HashMap::new()
        } else {
            bump(&self.counters.key_lookups);
            self.keys_for_verify(identity.tenant(), &route.project, &key_ids)
                .await
                .map_err(CommitError::before_commit)?
        };

        // Steps 5 and 6: verify and validate, before any lock.
        let keys: HashMap<String, ParsedKey> = keys
            .into_iter()
            .map(|(id, row)| (id, ParsedKey::new(row)))
            .collect();
        let keys = Arc::new(keys);
        let catalog = Arc::clone(&self.config.catalog);
        let items = cpu_map(items, move |item| match item {
            Item::Decoded(decoded) => verify_and_validate(*decoded, &keys, &catalog),
            other => other,
        })
        .await;

        if items.iter().any(|item| matches!(item, Item::Candidate(_))) {
            // Steps 7 and 8 in the next group commit.
            self.writer
                .submit(Job {
                    identity,
                    credential_id,
                    route,
                    items,
                    correlation_id: correlation_id.to_owned(),
                })
                .await
        } else {
            self.audit_only(&(credential_id, identity), &route, items, correlation_id)
                .await
        }
    }

    /// The named keys of (tenant, project): from the cache while fresh (with the database
    /// clock moved on by the entry's age), else in one query. Unknown ids are not remembered.
    async fn keys_for_verify(
        &self,
        tenant: &str,
        project: &str,
        key_ids: &[&str],
    ) -> Result<HashMap<String, VerifyKeyRow>, sqlx::Error> {
        let mut keys = HashMap::new();
        let mut missing = Vec::new();
        for &key_id in key_ids {
            let cache_key = (tenant.to_owned(), project.to_owned(), key_id.to_owned());
            match self.keys.get(&cache_key) {
                Some((mut row, age)) => {
                    row.now += chrono::Duration::from_std(age).unwrap_or_default();
                    keys.insert(cache_key.2, row);
                }
                None => missing.push(key_id),
            }
        }
        if !missing.is_empty() {
            let read_at = Instant::now();
            for row in store::keys_for_verify(&self.pool, tenant, project, &missing).await? {
                self.keys.insert(
                    (tenant.to_owned(), project.to_owned(), row.key_id.clone()),
                    row.clone(),
                    read_at,
                );
                keys.insert(row.key_id.clone(), row);
            }
        }
        Ok(keys)
    }

    /// Every item was refused before the lock: only the audit is written (one statement,
    /// autocommit, and only while the credential is live), and it reports the stream's cursor
    /// without creating the stream.
    async fn audit_only(
        &self,
        (credential_id, identity): &(i64, VerifiedIdentity),
        route: &Route,
        items: Vec<Item>,
        correlation_id: &str,
    ) -> Result<Answered, CommitError> {
        let mut audit = AuditBatch::default();
        for item in &items {
            if let Item::Done(done) = item {
                push_audit(&mut audit, done, correlation_id);
            }
        }
        bump(&self.counters.audit_writes);
        let (live, acknowledged_sequence) = store::audit_insert(
            &self.pool,
            audit_scope(identity, route),
            &audit,
            *credential_id,
        )
        .await
        .map_err(CommitError::at_commit)?;
        if !live {
            return Ok(Answered::Unauthenticated);
        }
        count_decided(&items);
        Ok(Answered::Decided(Decided {
            items,
            acknowledged_sequence,
        }))
    }
}

/// Who an ingest request's audit rows are about.
pub(super) fn audit_scope<'a>(identity: &'a VerifiedIdentity, route: &'a Route) -> AuditScope<'a> {
    let (producer_kind, producer_id) = identity.producer();
    AuditScope {
        // Audit goes to the verified tenant, never the URL's: a request into another
        // tenant is recorded where its sender belongs.
        tenant_id: identity.tenant(),
        project_id: is_identity(&route.project).then_some(route.project.as_str()),
        actor_account: identity.account(),
        actor_device: identity.device(),
        producer_kind,
        producer_id,
    }
}

/// Counts the decisions of a committed request.
pub(super) fn count_decided(items: &[Item]) {
    for item in items {
        if let Item::Done(done) = item {
            count(
                "decided",
                done.decision.outcome.as_str(),
                done.decision.reason,
            );
        }
    }
}

/// Appends one decision's audit columns.
pub(super) fn push_audit(audit: &mut AuditBatch, done: &Done, correlation_id: &str) {
    audit.event_id_sha256.push(
        done.event_id
            .as_deref()
            .map(wharf_core::envelope::event_id_digest_hex),
    );
    audit.producer_sequence.push(done.sequence);
    audit.outcome.push(done.decision.outcome.as_str());
    audit.reason.push(done.decision.reason);
    audit.correlation_id.push(correlation_id.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_peers_share_a_bucket_per_64() {
        let key = |s: &str| peer_key(s.parse().unwrap());
        assert_eq!(key("192.0.2.1"), key("192.0.2.1"));
        assert_ne!(key("192.0.2.1"), key("192.0.2.2"));
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.1"), key("192.0.2.1"));
    }
}
