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

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;
use serde_json::value::RawValue;
use wharf_core::envelope::{Envelope, is_identity};
use wharf_core::inbox::{
    self as rules, Decision, Found, Incoming, Outcome, Refusal, StreamState, advance_cursor,
};
use wharf_core::schema::Catalog;

use super::decode::{self, Decoded, VerifiedRoute};
use super::keys::{KeyUse, key_usable};
use super::limiter::{Denied, retry_after_s};
use super::response::{BatchResponse, ItemResponse, Original, Response, Status};
use super::streams::{CURSOR_WALK_ROWS_MAX, walk_cursor};
use super::{
    IdentityKey, Inbox, Route, SYNC_INGEST_PURPOSE, VerifiedIdentity, bump, new_correlation_id,
};
use crate::store::inbox::{
    self as store, AuditBatch, AuditScope, IdentityBatch, StreamKey, VerifyKeyRow,
};

/// Batches at least this long do their CPU work on blocking threads. Below it the hand-off costs
/// more than it saves, and a single envelope (~0.1 ms of work) stays on the async thread.
const BLOCKING_ENVELOPES_MIN: usize = 16;

/// One envelope's way through the pipeline.
enum Item {
    /// Decoded and routed; waiting for its key.
    Decoded(Box<Decoded>),
    /// Verified and valid; waiting for the stream decision.
    Candidate(Box<Candidate>),
    /// Decided: refused before the lock, or decided on the stream.
    Done(Done),
}

struct Candidate {
    envelope: Envelope,
    digest: [u8; 32],
    payload_text: String,
}

/// A finished item.
struct Done {
    decision: Decision,
    event_id: Option<String>,
    sequence: Option<u64>,
    original: Option<Original>,
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

/// Steps 5 and 6 for one decoded envelope, given the keys found in the verified scope.
fn verify_and_validate(
    decoded: Decoded,
    keys: &HashMap<String, VerifyKeyRow>,
    catalog: &Catalog,
) -> Item {
    let refused = |refusal: Refusal, envelope: &Envelope| Item::refused(refusal, Some(envelope));
    let envelope = &decoded.envelope;
    let Some(key) = keys.get(&envelope.integrity.key_id) else {
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
    let Some(verifying) = <[u8; 32]>::try_from(key.public_key.as_slice())
        .ok()
        .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
    else {
        // The table only holds keys that parsed when added; treat a broken row as unknown.
        return refused(Refusal::SignatureUnknownKey, envelope);
    };
    if let Err(refusal) = decode::verify(&decoded, &verifying) {
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
    }))
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
    let parallel = std::thread::available_parallelism().map_or(1, |n| n.get());
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
struct Decided {
    items: Vec<Item>,
    acknowledged_sequence: u64,
}

/// A retained identity known to this request: from the database or accepted earlier in it.
struct Known {
    sequence: u64,
    digest: [u8; 32],
    outcome: Outcome,
    correlation_id: String,
}

/// The retained identities one request compares against, indexed three ways.
#[derive(Default)]
struct Retained {
    known: Vec<Known>,
    by_event_id: HashMap<String, usize>,
    by_key: HashMap<String, usize>,
    by_sequence: HashMap<u64, usize>,
}

impl Retained {
    fn remember(&mut self, event_id: String, idempotency_key: String, k: Known) {
        let index = self.known.len();
        self.by_event_id.insert(event_id, index);
        self.by_key.insert(idempotency_key, index);
        self.by_sequence.insert(k.sequence, index);
        self.known.push(k);
    }

    fn get(&self, index: Option<&usize>) -> Option<&Known> {
        index.map(|&i| &self.known[i])
    }

    /// What the decision needs to know about `e`'s three identities.
    fn found(&self, e: &Envelope) -> Found {
        let retained = |k: &Known| rules::Retained {
            content_digest: k.digest,
            producer_sequence: k.sequence,
        };
        Found {
            by_event_id: self.get(self.by_event_id.get(&e.event_id)).map(retained),
            by_idempotency_key: self.get(self.by_key.get(&e.idempotency_key)).map(retained),
            by_sequence: self
                .get(self.by_sequence.get(&e.producer_sequence))
                .map(|k| k.digest),
        }
    }

    /// The acceptance a duplicate of `e` repeats (same content ⇒ same event id).
    fn original(&self, e: &Envelope) -> Option<Original> {
        self.get(self.by_event_id.get(&e.event_id))
            .or_else(|| self.get(self.by_key.get(&e.idempotency_key)))
            .map(|k| Original {
                outcome: k.outcome,
                correlation_id: k.correlation_id.clone(),
            })
    }
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
        let identity = match self
            .admit(
                peer,
                bearer,
                body.len(),
                self.config.body_bytes_max,
                &correlation_id,
            )
            .await
            .and_then(|identity| self.limit_identity(identity, 1, &correlation_id))
        {
            Ok(identity) => identity,
            Err(answer) => return answer,
        };
        match self
            .decide_all(&identity, &route, vec![body.to_vec()], &correlation_id)
            .await
        {
            Ok(decided) => {
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
            Err(e) => self.unavailable(e, correlation_id),
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
        let identity = match self.limit_identity(identity, cost, &correlation_id) {
            Ok(identity) => identity,
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
                    Ok(decided) => whole(Response {
                        acknowledged_sequence: Some(decided.acknowledged_sequence),
                        ..Response::bare(
                            Status::Outcome(decision.outcome),
                            decision.response_reason(),
                            correlation_id,
                        )
                    }),
                    Err(e) => whole(self.unavailable(e, correlation_id)),
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
            .decide_all(&identity, &route, bodies, &correlation_id)
            .await
        {
            Ok(decided) => BatchResponse {
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
            Err(e) => whole(self.unavailable(e, correlation_id)),
        }
    }

    /// Steps 0–2 (see [`Inbox::admit_uncounted`]), with every refusal counted.
    async fn admit(
        &self,
        peer: IpAddr,
        bearer: &str,
        body_bytes: usize,
        body_bytes_max: usize,
        correlation_id: &str,
    ) -> Result<VerifiedIdentity, Response> {
        self.admit_uncounted(peer, bearer, body_bytes, body_bytes_max, correlation_id)
            .await
            .map_err(counted)
    }

    /// Steps 0–2: body length, peer limiter, authentication. The peer limiter takes one token
    /// per request whatever it holds: it guards the credential lookup, which a request makes
    /// once, and it runs before the body is read.
    async fn admit_uncounted(
        &self,
        peer: IpAddr,
        bearer: &str,
        body_bytes: usize,
        body_bytes_max: usize,
        correlation_id: &str,
    ) -> Result<VerifiedIdentity, Response> {
        let bare = |status, reason| Response::bare(status, reason, correlation_id.to_owned());
        if body_bytes > body_bytes_max {
            return Err(bare(Status::TooLarge, "body-too-large"));
        }
        if let Err(wait) = self.peer_limiter.check(&peer_key(peer)) {
            return Err(Response {
                retry_after_s: Some(retry_after_s(wait)),
                ..bare(Status::RateLimited, "peer-limited")
            });
        }
        bump(&self.counters.authentications);
        match super::credentials::authenticate(&self.pool, bearer).await {
            Ok(Some(identity)) => Ok(identity),
            Ok(None) => Err(bare(Status::Unauthenticated, "unauthenticated")),
            Err(e) => Err(self.unavailable(e, correlation_id.to_owned())),
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

    fn unavailable(&self, e: sqlx::Error, correlation_id: String) -> Response {
        // The error text may name a constraint or a connection problem, never envelope content:
        // every value reaches PostgreSQL as a bind parameter, which errors do not echo.
        count(Status::Unavailable.as_str(), "none", "database");
        tracing::warn!(%correlation_id, error = %e, "inbox request failed; answered 503, nothing acknowledged");
        Response::bare(Status::Unavailable, "database", correlation_id)
    }

    /// Steps 4–8 for every body of one request.
    async fn decide_all(
        &self,
        identity: &VerifiedIdentity,
        route: &Route,
        bodies: Vec<Vec<u8>>,
        correlation_id: &str,
    ) -> Result<Decided, sqlx::Error> {
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

        // Step 5: the keys the envelopes name, in the verified scope only. One query per request.
        let mut key_ids: Vec<&str> = items
            .iter()
            .filter_map(|item| match item {
                Item::Decoded(d) => Some(d.envelope.integrity.key_id.as_str()),
                _ => None,
            })
            .collect();
        key_ids.sort_unstable();
        key_ids.dedup();
        let keys: HashMap<String, VerifyKeyRow> = if key_ids.is_empty() {
            HashMap::new()
        } else {
            bump(&self.counters.key_lookups);
            store::keys_for_verify(&self.pool, identity.tenant(), &route.project, &key_ids)
                .await?
                .into_iter()
                .map(|row| (row.key_id.clone(), row))
                .collect()
        };

        // Steps 5 and 6: verify and validate, before any lock.
        let keys = Arc::new(keys);
        let catalog = Arc::clone(&self.config.catalog);
        let items = cpu_map(items, move |item| match item {
            Item::Decoded(decoded) => verify_and_validate(*decoded, &keys, &catalog),
            other => other,
        })
        .await;

        if items.iter().any(|item| matches!(item, Item::Candidate(_))) {
            self.commit_on_stream(identity, route, items, correlation_id)
                .await
        } else {
            self.audit_only(identity, route, items, correlation_id)
                .await
        }
    }

    fn stream_key<'a>(identity: &'a VerifiedIdentity, route: &'a Route) -> StreamKey<'a> {
        let (producer_kind, producer_id) = identity.producer();
        StreamKey {
            tenant_id: identity.tenant(),
            project_id: &route.project,
            producer_kind,
            producer_id,
        }
    }

    fn audit_scope<'a>(identity: &'a VerifiedIdentity, route: &'a Route) -> AuditScope<'a> {
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
    fn count_decided(items: &[Item]) {
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

    fn audit_rows(items: &[Item], correlation_id: &str) -> AuditBatch {
        let mut audit = AuditBatch::default();
        for item in items {
            let Item::Done(done) = item else {
                continue;
            };
            let (outcome, reason, event_id, sequence) = (
                done.decision.outcome,
                done.decision.reason,
                done.event_id.as_deref(),
                done.sequence,
            );
            audit
                .event_id_sha256
                .push(event_id.map(wharf_core::envelope::event_id_digest_hex));
            audit.producer_sequence.push(sequence);
            audit.outcome.push(outcome.as_str());
            audit.reason.push(reason);
            audit.correlation_id.push(correlation_id.to_owned());
        }
        audit
    }

    /// Every item was refused before the lock: only the audit is written (one statement,
    /// autocommit), and it reports the stream's cursor without creating the stream.
    async fn audit_only(
        &self,
        identity: &VerifiedIdentity,
        route: &Route,
        items: Vec<Item>,
        correlation_id: &str,
    ) -> Result<Decided, sqlx::Error> {
        let audit = Self::audit_rows(&items, correlation_id);
        bump(&self.counters.audit_writes);
        let acknowledged_sequence =
            store::audit_insert(&self.pool, Self::audit_scope(identity, route), &audit).await?;
        Self::count_decided(&items);
        Ok(Decided {
            items,
            acknowledged_sequence,
        })
    }

    /// Steps 7 and 8: lock the stream, decide every candidate in request order, write
    /// identities + payloads + cursor + audit, commit.
    async fn commit_on_stream(
        &self,
        identity: &VerifiedIdentity,
        route: &Route,
        mut items: Vec<Item>,
        correlation_id: &str,
    ) -> Result<Decided, sqlx::Error> {
        let key = Self::stream_key(identity, route);
        let mut tx = self.pool.begin().await?;
        bump(&self.counters.stream_transactions);
        // Insert-if-missing only when the lock finds nothing, so the common case is one round
        // trip and creates no dead row version.
        let stream = match store::stream_lock(&mut *tx, key).await? {
            Some(stream) => stream,
            None => {
                store::stream_insert(&mut *tx, key).await?;
                store::stream_lock(&mut *tx, key)
                    .await?
                    .ok_or(sqlx::Error::RowNotFound)?
            }
        };
        // The running state: the cursor advances as this request's accepts close gaps, so each
        // envelope is decided against the stream as it stands after the ones before it.
        let mut state = StreamState {
            acknowledged_sequence: stream.acknowledged_sequence,
            replay_floor: stream.replay_floor,
        };
        let (event_ids, idempotency_keys, sequences) = {
            let mut event_ids = Vec::new();
            let mut keys = Vec::new();
            let mut sequences = Vec::new();
            for item in &items {
                if let Item::Candidate(c) = item {
                    event_ids.push(c.envelope.event_id.as_str());
                    keys.push(c.envelope.idempotency_key.as_str());
                    sequences.push(c.envelope.producer_sequence);
                }
            }
            (event_ids, keys, sequences)
        };
        let context = store::stream_context(
            &mut *tx,
            stream.stream_id,
            &event_ids,
            &idempotency_keys,
            &sequences,
            stream.acknowledged_sequence,
            CURSOR_WALK_ROWS_MAX,
        )
        .await?;
        // A full read may stop short of the run's end; the cursor is then walked again in the
        // database after the inserts.
        let ahead_truncated = context.ahead.len() as i64 == CURSOR_WALK_ROWS_MAX;
        let mut pending: BTreeSet<u64> = context.ahead.into_iter().collect();
        let retained = context.matching;

        let mut retained_set = Retained::default();
        for row in retained {
            // The table's CHECKs guarantee both; a row that broke them must not be matched as a
            // duplicate of anything, so it is skipped (and the insert would then fail loudly on
            // the unique constraints rather than silently accept).
            let (Ok(outcome), Ok(digest)) = (
                row.outcome.parse::<Outcome>(),
                <[u8; 32]>::try_from(row.content_sha256.as_slice()),
            ) else {
                continue;
            };
            retained_set.remember(
                row.event_id,
                row.idempotency_key,
                Known {
                    sequence: row.producer_sequence,
                    digest,
                    outcome,
                    correlation_id: row.correlation_id,
                },
            );
        }

        let mut accepted = IdentityBatch::default();
        for item in &mut items {
            let Item::Candidate(candidate) = item else {
                continue;
            };
            let e = &candidate.envelope;
            let incoming = Incoming {
                producer_sequence: e.producer_sequence,
                content_digest: candidate.digest,
            };
            let decision = rules::decide(&state, &incoming, &retained_set.found(e));
            let original = (decision.outcome == Outcome::IgnoreDuplicate)
                .then(|| retained_set.original(e))
                .flatten();
            if decision.store {
                accepted.event_id.push(e.event_id.clone());
                accepted.idempotency_key.push(e.idempotency_key.clone());
                accepted.producer_sequence.push(e.producer_sequence);
                accepted.content_sha256.push(candidate.digest.to_vec());
                accepted.event_type.push(e.event_type.clone());
                accepted.key_id.push(e.integrity.key_id.clone());
                accepted.outcome.push(decision.outcome.as_str());
                accepted.correlation_id.push(correlation_id.to_owned());
                accepted.occurred_at.push(e.occurred_at.clone());
                accepted
                    .payload
                    .push(std::mem::take(&mut candidate.payload_text));
                retained_set.remember(
                    e.event_id.clone(),
                    e.idempotency_key.clone(),
                    Known {
                        sequence: e.producer_sequence,
                        digest: candidate.digest,
                        outcome: decision.outcome,
                        correlation_id: correlation_id.to_owned(),
                    },
                );
                if e.producer_sequence > state.acknowledged_sequence {
                    pending.insert(e.producer_sequence);
                    if Some(e.producer_sequence) == state.acknowledged_sequence.checked_add(1) {
                        let run: Vec<u64> = pending.iter().copied().collect();
                        state.acknowledged_sequence =
                            advance_cursor(state.acknowledged_sequence, &run);
                        // Keep only what is still ahead, so each walk costs what is pending.
                        pending = pending.split_off(&state.acknowledged_sequence.saturating_add(1));
                    }
                }
            }
            *item = Item::Done(Done {
                decision,
                event_id: Some(e.event_id.clone()),
                sequence: Some(e.producer_sequence),
                original,
            });
        }

        // Step 8: one statement writes identities, payloads, the cursor and the audit.
        let audit = Self::audit_rows(&items, correlation_id);
        bump(&self.counters.audit_writes);
        let mut acknowledged_sequence = state.acknowledged_sequence;
        store::ingest_commit(
            &mut *tx,
            stream.stream_id,
            &accepted,
            acknowledged_sequence,
            Self::audit_scope(identity, route),
            &audit,
        )
        .await?;
        if ahead_truncated && !accepted.is_empty() {
            let walked = walk_cursor(&mut tx, stream.stream_id, acknowledged_sequence).await?;
            if walked != acknowledged_sequence {
                store::stream_set_cursor(&mut *tx, stream.stream_id, walked).await?;
                acknowledged_sequence = walked;
            }
        }
        tx.commit().await?;
        Self::count_decided(&items);
        Ok(Decided {
            items,
            acknowledged_sequence,
        })
    }
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
