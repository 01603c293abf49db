//! Group commit: the ingest writer that joins concurrent requests (of any streams) into one
//! transaction, SPEC §3.4 steps 7 and 8 for all of them at once.
//!
//! Owns: how requests are grouped, the order of locks, the decisions of every stream in request
//! order, what a failed group does, and when each request is answered. Must not know HTTP,
//! decoding or verification (requests arrive verified, as [`Job`]s), nor SQL (see
//! [`crate::store::inbox`]).
//!
//! One writer per [`super::Inbox`], started on first use, on a thread of its own with its own
//! connections ([`start`] says why). It takes the first waiting job,
//! then every job already waiting, up to [`GROUP_ENVELOPES_MAX`] envelopes, and commits them in
//! one transaction, with at most [`GROUPS_IN_FLIGHT`] groups committing at once; it never waits
//! for more, so a lone request is not delayed, and under load the requests that arrived during
//! one commit form the next group. A request that finds nothing waiting and a group free commits
//! alone on its own task. Each request is answered
//! only after the commit that holds its identities, payloads, cursor move and audit.
//!
//! In the transaction: every stream of the group is locked in stream id order (creating the
//! missing ones), then one statement reads the retained identities, the runs beyond each
//! cursor, and the current state of every credential and key involved (a group of one envelope
//! locks and reads in one statement, and reads again under the lock when another transaction
//! stored on its stream while it waited: [`lock_and_read_one`]); then each stream is
//! decided in the order its requests arrived, exactly as one request alone would be decided
//! (`wharf_core::inbox::StreamRun`, the pure per-stream batch decision); then one statement writes
//! everything. A credential revoked since it was cached makes its request 401 with nothing
//! written or audited; a key revoked or retired past its window since it was cached refuses the
//! envelopes it would have admitted, with their audit.
//!
//! A producer's next envelope, alone in its group (the commonest request), is first tried the
//! short way, [`store_presumed`]: decided against the state its sequence presumes, and written
//! and committed in one statement that holds that presumption against the database under the
//! stream's lock; where any part of it does not hold, that statement writes nothing and the
//! envelope takes the way above.
//!
//! A failure: when COMMIT was never sent or the server refused it ([`Committed::No`]), nothing
//! of the group was committed, so each request of a group of several is tried again alone — an
//! envelope that breaks a statement fails only its own request — and a request alone that
//! fails is answered 503. When the outcome of COMMIT is unknown, every request of the group is
//! answered 503 (unknown): a retry with the same envelope is then safe, as ever, because the
//! retained identities answer it as a duplicate if it did commit.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::{Semaphore, mpsc, oneshot};
use wharf_core::inbox::{Identity, Known, Outcome, Refusal, StreamRun, StreamState};

use super::ingest::{Candidate, Decided, Done, Item};
use super::keys::{KeyUse, key_usable};
use super::response::Original;
use super::streams::{CURSOR_WALK_ROWS_MAX, walk_cursor};
use super::{Counters, Route, VerifiedIdentity, bump};
use crate::commit::{CommitError, Committed};
use crate::held::Held;
use crate::store::inbox::{
    self as store, AuditScope, GroupContext, GroupQuery, GroupWrite, LockedOne, LoneQuery,
    StreamKey, StreamKeys, StreamRow, VerifyKeyRow,
};

/// Envelopes one group commit takes at most (a batch request larger than this is a group of
/// its own). Bounds the transaction, the statements' arrays and the time a lock is held.
pub const GROUP_ENVELOPES_MAX: usize = 1_000;
/// Groups committing at once. Two, so one group is being decided and written while the other
/// waits for its COMMIT to be flushed; their streams are locked in one order (stream id), so
/// they cannot deadlock, and two groups that share a stream are serialised by its lock.
pub const GROUPS_IN_FLIGHT: usize = 2;
/// Requests waiting for the writer at most; a sender past it waits for room.
const QUEUE_JOBS_MAX: usize = 4_096;
/// How a group's transaction starts, in the one round trip of `BEGIN`. Every statement of a
/// group finds its rows by index, and the plans PostgreSQL keeps for a connection (the scalar
/// form a group of one uses, `group_lock_context_one.sql`, is planned once) are made at
/// whatever size the tables had then: with sequential scans priced out, a plan made while a
/// table had one page cannot become a scan of the table it has grown into.
pub(crate) const BEGIN: &str = "BEGIN; SET LOCAL enable_seqscan = off";

/// One verified request, waiting for its stream.
pub(super) struct Job {
    pub identity: VerifiedIdentity,
    pub credential_id: i64,
    pub route: Route,
    /// Candidates and refusals, in request order.
    pub items: Vec<Item>,
    pub correlation_id: String,
}

impl Job {
    fn envelopes(&self) -> usize {
        self.items.len()
    }

    fn stream_key(&self) -> StreamKey<'_> {
        let (producer_kind, producer_id) = self.identity.producer();
        StreamKey {
            tenant_id: self.identity.tenant(),
            project_id: &self.route.project,
            producer_kind,
            producer_id,
        }
    }

    fn audit_scope(&self) -> AuditScope<'_> {
        super::ingest::audit_scope(&self.identity, &self.route)
    }
}

/// What a request gets from the writer.
pub(super) enum Answered {
    /// Decided and committed.
    Decided(Decided),
    /// Its credential was revoked before the commit read it: nothing written, not audited.
    Unauthenticated,
}

type Reply = oneshot::Sender<Result<Answered, CommitError>>;

/// The handle requests submit to.
#[derive(Debug)]
pub(super) struct Writer {
    queue: OnceLock<mpsc::Sender<(Job, Reply)>>,
    /// One permit per group committing, in the writer task or inline.
    in_flight: Arc<Semaphore>,
    /// Where the writer's connections go (server, credentials, name, connect timeout).
    pool: PgPool,
    /// The connections groups committed inline use, on the application's runtime.
    inline: Held,
    counters: Arc<Counters>,
}

impl Writer {
    pub(super) fn new(pool: PgPool, counters: Arc<Counters>) -> Writer {
        Writer {
            queue: OnceLock::new(),
            in_flight: Arc::new(Semaphore::new(GROUPS_IN_FLIGHT)),
            inline: Held::like(pool.clone(), GROUPS_IN_FLIGHT),
            pool,
            counters,
        }
    }

    /// Decides and commits `job` in the next group; answers after its commit.
    ///
    /// When nothing waits and a group may start, the job is its own group, committed on the
    /// caller's task: a lone producer pays no hand-off between tasks. Dropping the caller's
    /// future then drops (rolls back) only its own transaction, and its client is gone anyway.
    pub(super) async fn submit(&self, job: Job) -> Result<Answered, CommitError> {
        let queue = self
            .queue
            .get_or_init(|| start(&self.pool, &self.in_flight, &self.counters));
        if queue.capacity() == queue.max_capacity()
            && let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned()
        {
            let mut answers =
                commit_group(&self.inline, &self.counters, std::slice::from_ref(&job)).await;
            drop(permit);
            return answers.remove(0);
        }
        let (reply, answer) = oneshot::channel();
        // The writer ends only when every handle is gone, or its runtime is: not sent means
        // nothing of this job reached the database; no answer means the writer stopped while
        // it may have been committing.
        queue
            .send((job, reply))
            .await
            .map_err(|_| CommitError::before_commit(sqlx::Error::PoolClosed))?;
        answer
            .await
            .map_err(|_| CommitError::OutcomeUnknown(sqlx::Error::PoolClosed))?
    }
}

/// Starts the writer and gives the queue it reads.
///
/// On a thread of its own, with a single-threaded runtime and connections of its own
/// ([`Held`]: at most [`GROUPS_IN_FLIGHT`], opened as `pool` opens its own): under load the
/// application's runtime is busy answering and verifying requests, and (the likely cause,
/// inferred rather than traced) a group's round trips each waited there for a worker to notice
/// the database had answered and then for its turn behind those requests.
/// `pg_stat_activity` showed the group's backend idle in transaction, waiting for wharf, while
/// a fifth of the machine was idle; single envelopes from 64 producers went ×1.18 faster on
/// this thread (BENCHMARKS.md, 2026-12-07 afternoon). The thread sleeps in its own poll for the
/// database's answers, so the kernel wakes it as each one arrives. Where no thread or runtime
/// can be made, the writer runs as a task of the caller's runtime, as it did before.
///
/// Not the executor's `own_pool`: that gives its connections a name of their own; these keep
/// the application's name, which `wharf restore` looks for among running processes.
fn start(
    pool: &PgPool,
    in_flight: &Arc<Semaphore>,
    counters: &Arc<Counters>,
) -> mpsc::Sender<(Job, Reply)> {
    let (send, receive) = mpsc::channel(QUEUE_JOBS_MAX);
    let thread_pool = pool.clone();
    let (thread_in_flight, thread_counters) = (Arc::clone(in_flight), Arc::clone(counters));
    let started = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|runtime| {
            std::thread::Builder::new()
                .name("wharf-inbox-writer".into())
                .spawn(move || {
                    runtime.block_on(async move {
                        // Opened on this runtime: a connection's answers wake the runtime that
                        // opened it, and they must wake this thread.
                        let held = Arc::new(Held::like(thread_pool, GROUPS_IN_FLIGHT));
                        run(
                            receive,
                            Arc::clone(&thread_in_flight),
                            Arc::clone(&held),
                            thread_counters,
                        )
                        .await;
                        // Every handle is gone. Groups still committing finish before the
                        // runtime (and the tasks it runs them on) is dropped: a request that
                        // gave up is committed all the same, as on any runtime.
                        let _ = thread_in_flight.acquire_many(GROUPS_IN_FLIGHT as u32).await;
                        held.close_all().await;
                    });
                })
        });
    match started {
        Ok(_) => send,
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the inbox writer; it runs on the application's runtime");
            let (send, receive) = mpsc::channel(QUEUE_JOBS_MAX);
            tokio::spawn(run(
                receive,
                Arc::clone(in_flight),
                Arc::new(Held::like(pool.clone(), GROUPS_IN_FLIGHT)),
                Arc::clone(counters),
            ));
            send
        }
    }
}

/// The writer task: takes groups while fewer than [`GROUPS_IN_FLIGHT`] are committing, until
/// every handle is dropped.
async fn run(
    mut queue: mpsc::Receiver<(Job, Reply)>,
    in_flight: Arc<Semaphore>,
    held: Arc<Held>,
    counters: Arc<Counters>,
) {
    loop {
        // Waiting for a permit first lets the queue fill while every group is busy.
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let Some(first) = queue.recv().await else {
            return;
        };
        let mut envelopes = first.0.envelopes();
        let mut group = vec![first];
        while envelopes < GROUP_ENVELOPES_MAX {
            match queue.try_recv() {
                Ok(next) => {
                    envelopes += next.0.envelopes();
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        let (held, counters) = (Arc::clone(&held), Arc::clone(&counters));
        tokio::spawn(async move {
            let (jobs, replies): (Vec<Job>, Vec<Reply>) = group.into_iter().unzip();
            let answers = commit_group(&held, &counters, &jobs).await;
            for (reply, answer) in replies.into_iter().zip(answers) {
                // A request that gave up (its client went away) is committed all the same.
                let _ = reply.send(answer);
            }
            drop(permit);
        });
    }
}

/// Commits `jobs` together, or (when that provably committed nothing) one by one.
async fn commit_group(
    held: &Held,
    counters: &Counters,
    jobs: &[Job],
) -> Vec<Result<Answered, CommitError>> {
    match attempt_on(held, counters, jobs).await {
        Ok(answers) => answers.into_iter().map(Ok).collect(),
        Err(e) if jobs.len() > 1 && e.committed() == Committed::No => {
            tracing::debug!(error = %e, jobs = jobs.len(), "group commit failed, nothing committed; each request is tried alone");
            let mut answers = Vec::with_capacity(jobs.len());
            for job in jobs {
                answers.push(
                    attempt_on(held, counters, std::slice::from_ref(job))
                        .await
                        .map(|mut one| one.remove(0)),
                );
            }
            answers
        }
        Err(e) if jobs.len() == 1 => vec![Err(e)],
        Err(e) => jobs.iter().map(|_| Err(same_error(&e))).collect(),
    }
}

/// `e` again, for each request of its group: the same knowledge of the outcome, the same text.
fn same_error(e: &CommitError) -> CommitError {
    let again = sqlx::Error::Protocol(format!("group commit: {}", e.source_error()));
    match e.committed() {
        Committed::No => CommitError::NotCommitted(again),
        _ => CommitError::OutcomeUnknown(again),
    }
}

/// One stream of a group: its lock, and its decisions so far (`wharf_core::inbox::StreamRun`,
/// tagged with the correlation id of the request that accepted each identity).
struct Slot {
    stream: StreamRow,
    run: StreamRun<String>,
    truncated: bool,
}

/// [`attempt`] on a connection of `held`'s, given back to it afterwards.
async fn attempt_on(
    held: &Held,
    counters: &Counters,
    jobs: &[Job],
) -> Result<Vec<Answered>, CommitError> {
    let mut conn = held.take().await.map_err(CommitError::before_commit)?;
    let answers = attempt(&mut conn, counters, jobs).await;
    held.give_back(conn, answers.is_ok());
    answers
}

/// One transaction for `jobs`: lock, read, decide, write, commit. One answer per job.
async fn attempt(
    conn: &mut PgConnection,
    counters: &Counters,
    jobs: &[Job],
) -> Result<Vec<Answered>, CommitError> {
    if let Some((job, candidate)) = presumable(jobs)
        && let Some(answer) = store_presumed(&mut *conn, counters, job, candidate).await?
    {
        return Ok(vec![answer]);
    }
    let before = CommitError::before_commit;
    let mut tx = conn.begin_with(BEGIN).await.map_err(before)?;
    bump(&counters.stream_transactions);

    // Step 7: the streams, each once, locked in stream id order.
    let mut slot_of: HashMap<(&str, &str, &str, &str), usize> = HashMap::new();
    let mut job_slot = Vec::with_capacity(jobs.len());
    let mut keys = StreamKeys::default();
    for job in jobs {
        let key = job.stream_key();
        let next = slot_of.len();
        let slot = *slot_of
            .entry((
                key.tenant_id,
                key.project_id,
                key.producer_kind,
                key.producer_id,
            ))
            .or_insert_with(|| {
                keys.push(key);
                next
            });
        job_slot.push(slot);
    }
    let (streams, context) = match lone(jobs) {
        Some((job, candidate)) => {
            let (stream, context) = lock_and_read_one(&mut tx, job, candidate)
                .await
                .map_err(before)?;
            (vec![stream], context)
        }
        None => lock_and_read(&mut tx, jobs, &keys, &job_slot)
            .await
            .map_err(before)?,
    };

    let Decisions {
        write,
        decided,
        slots,
    } = decide_group(jobs, &job_slot, &streams, context);

    // Step 8: one statement writes identities, payloads, cursors and audit.
    if !write.audit.outcome.is_empty() {
        store::group_commit(&mut *tx, &write)
            .await
            .map_err(before)?;
    }
    let mut cursors: Vec<u64> = slots
        .iter()
        .map(|s| s.run.state().acknowledged_sequence)
        .collect();
    for (slot, cursor) in slots.iter().zip(cursors.iter_mut()) {
        if slot.truncated && slot.run.stored_any() {
            let walked = walk_cursor(&mut tx, slot.stream.stream_id, *cursor)
                .await
                .map_err(before)?;
            if walked != *cursor {
                store::stream_set_cursor(&mut *tx, slot.stream.stream_id, walked)
                    .await
                    .map_err(before)?;
                *cursor = walked;
            }
        }
    }
    crate::commit::commit(tx).await?;

    Ok(answers(counters, decided, &job_slot, &cursors))
}

/// Each job's answer once its group committed: its decisions and its stream's cursor.
fn answers(
    counters: &Counters,
    decided: Vec<Option<Vec<Item>>>,
    job_slot: &[usize],
    cursors: &[u64],
) -> Vec<Answered> {
    decided
        .into_iter()
        .zip(job_slot)
        .map(|(items, &s)| match items {
            None => Answered::Unauthenticated,
            Some(items) => {
                bump(&counters.audit_writes);
                super::ingest::count_decided(&items);
                Answered::Decided(Decided {
                    items,
                    acknowledged_sequence: cursors[s],
                })
            }
        })
        .collect()
}

/// A request of one envelope, alone in its group ([`lone`], with nothing else to audit): the
/// one it may store by [`store_presumed`].
fn presumable(jobs: &[Job]) -> Option<(&Job, &Candidate)> {
    lone(jobs).filter(|(job, _)| job.items.len() == 1)
}

/// The lone envelope stored in one round trip, when its stream is as its sequence presumes
/// (`store_presumed.sql`, migration 0019): the cursor one below it, nothing retained at or beyond it,
/// none of its identities retained, its credential live and its key active with the public key
/// that verified it. It is decided exactly as any group is ([`decide_group`]), against that
/// presumed state, and the statement writes that decision only where the database agrees with
/// every part of it, under the stream's lock, committing by itself. `None` when it did not: it
/// wrote nothing, and the envelope is decided the ordinary way.
///
/// This is the commonest request there is (a producer sending its next envelope), and the
/// ordinary way costs four round trips (BEGIN, lock and read, write, COMMIT) where this costs
/// one; anything else (a first envelope on a new stream, a duplicate, a gap, a revoked key)
/// pays one statement more than before, which wrote nothing.
async fn store_presumed(
    conn: &mut PgConnection,
    counters: &Counters,
    job: &Job,
    candidate: &Candidate,
) -> Result<Option<Answered>, CommitError> {
    let e = &candidate.envelope;
    // A first envelope almost always finds no stream yet (streams are made by the ordinary
    // way), so it is not presumed: a new producer pays no statement that cannot store.
    let cursor = match e.producer_sequence.checked_sub(1) {
        Some(cursor) if cursor >= 1 => cursor,
        _ => return Ok(None),
    };
    // The stream's id is found by its key in the statement; the decision does not read it.
    let stream = StreamRow {
        stream_id: 0,
        acknowledged_sequence: cursor,
        replay_floor: e.producer_sequence,
    };
    let context = GroupContext {
        live_credentials: vec![job.credential_id],
        keys: vec![(
            (job.identity.tenant().to_owned(), job.route.project.clone()),
            VerifyKeyRow {
                key_id: e.integrity.key_id.clone(),
                public_key: candidate.public_key.to_vec(),
                state: "active".to_owned(),
                retired_at: None,
                replay_window_seconds: 0,
                now: chrono::Utc::now(),
            },
        )],
        ..GroupContext::default()
    };
    let Decisions { write, decided, .. } =
        decide_group(std::slice::from_ref(job), &[0], &[stream], context);
    let presumption = store::Presumption {
        stream: job.stream_key(),
        credential_id: job.credential_id,
        public_key: &candidate.public_key,
    };
    bump(&counters.stream_transactions);
    let stored = store::store_presumed(conn, &presumption, &write)
        .await
        .map_err(CommitError::at_commit)?;
    Ok(stored.then(|| answers(counters, decided, &[0], &[e.producer_sequence]).remove(0)))
}

/// A group's decisions, made against what its read found: what to write, each job's items
/// (`None`: its credential was revoked, nothing of it is written), and each stream's run.
struct Decisions {
    write: GroupWrite,
    decided: Vec<Option<Vec<Item>>>,
    slots: Vec<Slot>,
}

/// Decides every job of a group, each stream in the order its requests arrived, against the
/// streams as locked and the context read under the locks. Pure: no IO.
fn decide_group(
    jobs: &[Job],
    job_slot: &[usize],
    streams: &[StreamRow],
    context: GroupContext,
) -> Decisions {
    let slot_by_stream: HashMap<i64, usize> = streams
        .iter()
        .enumerate()
        .map(|(i, s)| (s.stream_id, i))
        .collect();
    let mut slots: Vec<Slot> = streams
        .iter()
        .map(|&stream| Slot {
            stream,
            run: StreamRun::new(StreamState {
                acknowledged_sequence: stream.acknowledged_sequence,
                replay_floor: stream.replay_floor,
            }),
            truncated: false,
        })
        .collect();
    let mut ahead_rows = vec![0i64; slots.len()];
    for (stream_id, sequence) in context.ahead {
        if let Some(&i) = slot_by_stream.get(&stream_id) {
            slots[i].run.retained_ahead(sequence);
            ahead_rows[i] += 1;
        }
    }
    for (slot, rows) in slots.iter_mut().zip(ahead_rows) {
        // A full read may stop short of the run's end; the cursor is then walked again in
        // the database after the inserts.
        slot.truncated = rows == CURSOR_WALK_ROWS_MAX;
    }
    for (stream_id, row) in context.matching {
        let Some(&i) = slot_by_stream.get(&stream_id) else {
            continue;
        };
        // The table's CHECKs guarantee both; a row that broke them must not be matched as a
        // duplicate of anything, so it is skipped (and the insert would then fail loudly on
        // the unique constraints rather than silently accept).
        let (Ok(outcome), Ok(digest)) = (
            row.outcome.parse::<Outcome>(),
            <[u8; 32]>::try_from(row.content_sha256.as_slice()),
        ) else {
            continue;
        };
        slots[i].run.retained(
            row.event_id,
            row.idempotency_key,
            Known {
                sequence: row.producer_sequence,
                digest,
                outcome,
                tag: row.correlation_id,
            },
        );
    }
    let live: BTreeSet<i64> = context.live_credentials.into_iter().collect();
    let fresh_keys: HashMap<(&str, &str, &str), &VerifyKeyRow> = context
        .keys
        .iter()
        .map(|((tenant, project), row)| {
            (
                (tenant.as_str(), project.as_str(), row.key_id.as_str()),
                row,
            )
        })
        .collect();

    // Each stream decided in request order, against its running state.
    let mut write = GroupWrite::default();
    let mut decided: Vec<Option<Vec<Item>>> = Vec::with_capacity(jobs.len());
    for (job, &s) in jobs.iter().zip(job_slot) {
        if !live.contains(&job.credential_id) {
            decided.push(None);
            continue;
        }
        let slot = &mut slots[s];
        let mut items = Vec::with_capacity(job.items.len());
        for item in &job.items {
            let done = match item {
                Item::Candidate(c) => {
                    let e = &c.envelope;
                    let key = fresh_keys
                        .get(&(
                            job.identity.tenant(),
                            job.route.project.as_str(),
                            e.integrity.key_id.as_str(),
                        ))
                        .copied();
                    match key_refusal(key, &c.public_key) {
                        Some(refusal) => Done::refused(refusal, e),
                        None => decide(slot, &mut write, job, c),
                    }
                }
                Item::Done(done) => done.clone(),
                // Unfinished items do not reach the writer; refusing is the safe answer.
                Item::Decoded(d) => Done::refused(Refusal::Payload, &d.envelope),
            };
            items.push(Item::Done(done));
        }
        let scope = job.audit_scope();
        for item in &items {
            if let Item::Done(done) = item {
                write.audit_tenant.push(scope.tenant_id.to_owned());
                write
                    .audit_project
                    .push(scope.project_id.map(str::to_owned));
                write.audit_account.push(scope.actor_account.to_owned());
                write
                    .audit_device
                    .push(scope.actor_device.map(str::to_owned));
                write
                    .audit_producer_kind
                    .push(scope.producer_kind.to_owned());
                write.audit_producer_id.push(scope.producer_id.to_owned());
                super::ingest::push_audit(&mut write.audit, done, &job.correlation_id);
            }
        }
        decided.push(Some(items));
    }
    // A stream that stored an identity is written even when its cursor stays: every such
    // transaction leaves a new version of the stream's row, which is how
    // `group_lock_context_one.sql` tells a read that missed it.
    for slot in &slots {
        let cursor = slot.run.state().acknowledged_sequence;
        if cursor != slot.stream.acknowledged_sequence || slot.run.stored_any() {
            write.cursor_stream.push(slot.stream.stream_id);
            write.cursor.push(cursor);
        }
    }

    Decisions {
        write,
        decided,
        slots,
    }
}

/// The one envelope of a group of one request, when that is all the group holds: it reads
/// through [`lock_and_read_one`].
fn lone(jobs: &[Job]) -> Option<(&Job, &Candidate)> {
    let [job] = jobs else {
        return None;
    };
    let mut candidates = job.items.iter().filter_map(|item| match item {
        Item::Candidate(c) => Some(c),
        _ => None,
    });
    let first = candidates.next()?;
    candidates.next().is_none().then_some((job, first))
}

/// Executions of `group_lock_context_one.sql` one group makes at most: a missing stream is
/// created and read again, and a read that began before its lock was granted is repeated
/// under the lock (current then), so three suffice; the bound turns a surprise into an error.
const LONE_READS_MAX: usize = 4;

/// Step 7 and the read for a group of one envelope on one stream: the lock and the context in
/// one statement (`group_lock_context_one.sql`), one round trip fewer than
/// [`lock_and_read`]. When another transaction stored on the stream while this one waited for
/// its lock, the statement says its read is not current, and it runs again under the lock.
async fn lock_and_read_one(
    conn: &mut PgConnection,
    job: &Job,
    candidate: &Candidate,
) -> Result<(StreamRow, GroupContext), sqlx::Error> {
    let e = &candidate.envelope;
    let query = LoneQuery {
        stream: job.stream_key(),
        event_id: &e.event_id,
        idempotency_key: &e.idempotency_key,
        producer_sequence: e.producer_sequence,
        credential_id: job.credential_id,
        key_tenant: job.identity.tenant(),
        key_project: &job.route.project,
        key_id: &e.integrity.key_id,
    };
    for _ in 0..LONE_READS_MAX {
        match store::group_lock_context_one(&mut *conn, &query, CURSOR_WALK_ROWS_MAX).await? {
            Some(LockedOne {
                stream,
                context: Some(context),
            }) => return Ok((stream, context)),
            Some(LockedOne { context: None, .. }) => {}
            None => {
                let mut keys = StreamKeys::default();
                keys.push(query.stream);
                store::group_streams_insert(&mut *conn, &keys).await?;
            }
        }
    }
    Err(sqlx::Error::Protocol(format!(
        "the stream's lock and read did not settle in {LONE_READS_MAX} executions"
    )))
}

/// Step 7 and the read for any other group: every stream locked in stream id order (the
/// missing ones created), then one statement reads the context of all (`group_context.sql`).
async fn lock_and_read(
    conn: &mut PgConnection,
    jobs: &[Job],
    keys: &StreamKeys,
    job_slot: &[usize],
) -> Result<(Vec<StreamRow>, GroupContext), sqlx::Error> {
    let mut streams: Vec<Option<StreamRow>> = vec![None; keys.len()];
    for (index, row) in store::group_lock(&mut *conn, keys).await? {
        streams[index] = Some(row);
    }
    let missing: Vec<usize> = (0..keys.len()).filter(|&i| streams[i].is_none()).collect();
    if !missing.is_empty() {
        let mut absent = StreamKeys::default();
        for &i in &missing {
            absent.push(keys.key(i));
        }
        store::group_streams_insert(&mut *conn, &absent).await?;
        for (index, row) in store::group_lock(&mut *conn, &absent).await? {
            streams[missing[index]] = Some(row);
        }
    }
    let streams: Vec<StreamRow> = streams
        .into_iter()
        .map(|s| s.ok_or(sqlx::Error::RowNotFound))
        .collect::<Result<_, _>>()?;

    // One read for every decision of the group, after the locks (see group_context.sql).
    let mut query = GroupQuery::default();
    for (job, &slot) in jobs.iter().zip(job_slot) {
        query.credential_id.push(job.credential_id);
        for item in &job.items {
            if let Item::Candidate(c) = item {
                query.candidate_stream.push(streams[slot].stream_id);
                query.event_id.push(&c.envelope.event_id);
                query.idempotency_key.push(&c.envelope.idempotency_key);
                query.producer_sequence.push(c.envelope.producer_sequence);
                query.key_tenant.push(job.identity.tenant());
                query.key_project.push(&job.route.project);
                query.key_id.push(&c.envelope.integrity.key_id);
            }
        }
    }
    query.credential_id.sort_unstable();
    query.credential_id.dedup();
    query.stream_id = streams.iter().map(|s| s.stream_id).collect();
    query.cursor = streams.iter().map(|s| s.acknowledged_sequence).collect();
    let context = store::group_context(&mut *conn, &query, CURSOR_WALK_ROWS_MAX).await?;

    Ok((streams, context))
}

/// Why a key that verified an envelope (from the cache) no longer admits it, as the database
/// has it now: gone or replaced (unknown), revoked, or retired past its window.
fn key_refusal(key: Option<&VerifyKeyRow>, verified_with: &[u8; 32]) -> Option<Refusal> {
    let Some(key) = key else {
        return Some(Refusal::SignatureUnknownKey);
    };
    if key.public_key.as_slice() != verified_with.as_slice() {
        return Some(Refusal::SignatureUnknownKey);
    }
    match key_usable(
        &key.state,
        key.retired_at,
        key.replay_window_seconds,
        key.now,
    ) {
        KeyUse::Usable => None,
        KeyUse::Revoked => Some(Refusal::SignatureRevokedKey),
        KeyUse::RetiredPastWindow => Some(Refusal::SignatureRetiredKey),
    }
}

/// Decides one verified envelope on its locked stream (the rule is
/// `wharf_core::inbox::StreamRun`), adding what it stores to `write`.
fn decide(
    slot: &mut Slot,
    write: &mut GroupWrite,
    job: &Job,
    candidate: &super::ingest::Candidate,
) -> Done {
    let e = &candidate.envelope;
    let decided = slot.run.decide(
        Identity {
            event_id: &e.event_id,
            idempotency_key: &e.idempotency_key,
            producer_sequence: e.producer_sequence,
            content_digest: candidate.digest,
        },
        job.correlation_id.clone(),
    );
    let decision = decided.decision;
    if decision.store {
        let accepted = &mut write.accepted;
        write.stream_id.push(slot.stream.stream_id);
        accepted.event_id.push(e.event_id.clone());
        accepted.idempotency_key.push(e.idempotency_key.clone());
        accepted.producer_sequence.push(e.producer_sequence);
        accepted.content_sha256.push(candidate.digest.to_vec());
        accepted.event_type.push(e.event_type.clone());
        accepted.key_id.push(e.integrity.key_id.clone());
        accepted.outcome.push(decision.outcome.as_str());
        accepted.correlation_id.push(job.correlation_id.clone());
        accepted.occurred_at.push(e.occurred_at.clone());
        accepted.payload.push(candidate.payload_text.clone());
    }
    Done {
        decision,
        event_id: Some(e.event_id.clone()),
        sequence: Some(e.producer_sequence),
        original: decided.original.map(|(outcome, correlation_id)| Original {
            outcome,
            correlation_id,
        }),
    }
}
