//! The group commit of the inbox (`sql/inbox/group_*.sql`, `payloads_delete_expired.sql`):
//! locking a request's streams, reading their context (cursors, matching identities) in one
//! statement, and writing identities, payloads, cursor moves and audit in one; and the payload
//! retention.
//!
//! Owns: statement text and row shapes, as the rest of [`super`]. Must not know: the batch
//! decision (`wharf_core::inbox::StreamRun` makes it).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgExecutor, Row};

use super::audit::AuditBatch;
use super::keys::VerifyKeyRow;
use super::streams::StreamRow;
use super::{StreamKey, seq};

/// A retained identity that shares something with an incoming envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityRow {
    /// Its event id.
    pub event_id: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Its sequence.
    pub producer_sequence: u64,
    /// Its content digest.
    pub content_sha256: Vec<u8>,
    /// The outcome it was accepted with.
    pub outcome: String,
    /// The correlation id of the request that accepted it.
    pub correlation_id: String,
}

/// Columns of accepted envelopes, one element per envelope (see `group_commit.sql`).
#[derive(Debug, Default, Clone)]
pub struct IdentityBatch {
    /// Event ids.
    pub event_id: Vec<String>,
    /// Idempotency keys.
    pub idempotency_key: Vec<String>,
    /// Sequences.
    pub producer_sequence: Vec<u64>,
    /// Content digests.
    pub content_sha256: Vec<Vec<u8>>,
    /// Event types.
    pub event_type: Vec<String>,
    /// Key ids that verified them.
    pub key_id: Vec<String>,
    /// `accept-delayed` or `accept-reordered`.
    pub outcome: Vec<&'static str>,
    /// Correlation ids.
    pub correlation_id: Vec<String>,
    /// `occurred_at` as sent.
    pub occurred_at: Vec<String>,
    /// Canonical JSON of each payload.
    pub payload: Vec<String>,
}

/// Rows `group_commit.sql` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Identities.
    pub identities: i64,
    /// Payloads.
    pub payloads: i64,
    /// Audit rows.
    pub audited: i64,
}

/// `payloads_delete_expired.sql`: deletes at most `batch_max` payloads stored before
/// `older_than`; returns how many.
pub async fn payloads_delete_expired<'e>(
    ex: impl PgExecutor<'e>,
    older_than: DateTime<Utc>,
    batch_max: i64,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(include_str!(
        "../../../sql/inbox/payloads_delete_expired.sql"
    ))
    .bind(older_than)
    .bind(batch_max)
    .execute(ex)
    .await?
    .rows_affected())
}

/// Stream keys of a group commit, one element per stream (see `group_lock.sql`).
#[derive(Debug, Default, Clone)]
pub struct StreamKeys {
    /// Tenants.
    pub tenant_id: Vec<String>,
    /// Projects.
    pub project_id: Vec<String>,
    /// `device` or `account`.
    pub producer_kind: Vec<String>,
    /// Device or account ids.
    pub producer_id: Vec<String>,
}

impl StreamKeys {
    /// Appends a key.
    pub fn push(&mut self, key: StreamKey<'_>) {
        self.tenant_id.push(key.tenant_id.to_owned());
        self.project_id.push(key.project_id.to_owned());
        self.producer_kind.push(key.producer_kind.to_owned());
        self.producer_id.push(key.producer_id.to_owned());
    }

    /// The key at `index` (panics past [`StreamKeys::len`], as a slice does).
    pub fn key(&self, index: usize) -> StreamKey<'_> {
        StreamKey {
            tenant_id: &self.tenant_id[index],
            project_id: &self.project_id[index],
            producer_kind: &self.producer_kind[index],
            producer_id: &self.producer_id[index],
        }
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.tenant_id.len()
    }
}

/// `group_lock.sql`: locks the streams that exist, in stream id order; `(index into keys,
/// stream)` for each found. One stream is locked by `stream_lock.sql`, whose scalar parameters
/// let PostgreSQL reuse a generic plan instead of planning the array form every time (see
/// `group_lock_context_one.sql`).
pub async fn group_lock<'e>(
    ex: impl PgExecutor<'e>,
    keys: &StreamKeys,
) -> Result<Vec<(usize, StreamRow)>, sqlx::Error> {
    if keys.len() == 1 {
        let row = super::streams::stream_lock(ex, keys.key(0)).await?;
        return Ok(row.map(|row| (0, row)).into_iter().collect());
    }
    let rows = sqlx::query(include_str!("../../../sql/inbox/group_lock.sql"))
        .bind(&keys.tenant_id)
        .bind(&keys.project_id)
        .bind(&keys.producer_kind)
        .bind(&keys.producer_id)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            let ordinal: i64 = r.try_get(0)?;
            let index = usize::try_from(ordinal - 1)
                .map_err(|_| sqlx::Error::Decode(format!("ordinal {ordinal}").into()))?;
            Ok((
                index,
                StreamRow {
                    stream_id: r.try_get(1)?,
                    acknowledged_sequence: seq(r.try_get(2)?)?,
                    replay_floor: seq(r.try_get(3)?)?,
                },
            ))
        })
        .collect()
}

/// `group_streams_insert.sql`: creates the streams that are missing.
pub async fn group_streams_insert<'e>(
    ex: impl PgExecutor<'e>,
    keys: &StreamKeys,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../../sql/inbox/group_streams_insert.sql"))
        .bind(&keys.tenant_id)
        .bind(&keys.project_id)
        .bind(&keys.producer_kind)
        .bind(&keys.producer_id)
        .execute(ex)
        .await?;
    Ok(())
}

/// What a group commit asks `group_context.sql` about.
#[derive(Debug, Default, Clone)]
pub struct GroupQuery<'a> {
    /// The stream of each candidate envelope.
    pub candidate_stream: Vec<i64>,
    /// Its event id.
    pub event_id: Vec<&'a str>,
    /// Its idempotency key.
    pub idempotency_key: Vec<&'a str>,
    /// Its sequence.
    pub producer_sequence: Vec<u64>,
    /// Every locked stream.
    pub stream_id: Vec<i64>,
    /// Its cursor.
    pub cursor: Vec<u64>,
    /// Credentials to check.
    pub credential_id: Vec<i64>,
    /// Keys to read: tenant, project, key id.
    pub key_tenant: Vec<&'a str>,
    /// See `key_tenant`.
    pub key_project: Vec<&'a str>,
    /// See `key_tenant`.
    pub key_id: Vec<&'a str>,
}

/// What `group_context.sql` read.
#[derive(Debug, Default, Clone)]
pub struct GroupContext {
    /// (stream, identity) for every retained identity sharing something with a candidate.
    pub matching: Vec<(i64, IdentityRow)>,
    /// (stream, sequence) just beyond each stream's cursor, ascending per stream.
    pub ahead: Vec<(i64, u64)>,
    /// The credentials that are live.
    pub live_credentials: Vec<i64>,
    /// ((tenant, project), key) as stored now.
    pub keys: Vec<((String, String), VerifyKeyRow)>,
}

/// What `group_lock_context_one.sql` asks about: one envelope on one stream, with one
/// credential (the group of a lone request).
#[derive(Debug, Clone, Copy)]
pub struct LoneQuery<'a> {
    /// The stream, by its key.
    pub stream: StreamKey<'a>,
    /// The envelope's event id.
    pub event_id: &'a str,
    /// Its idempotency key.
    pub idempotency_key: &'a str,
    /// Its sequence.
    pub producer_sequence: u64,
    /// The request's credential.
    pub credential_id: i64,
    /// The key that verified it: tenant, project, key id.
    pub key_tenant: &'a str,
    /// See `key_tenant`.
    pub key_project: &'a str,
    /// See `key_tenant`.
    pub key_id: &'a str,
}

/// What `group_lock_context_one.sql` found: the stream, now locked, and the context when it was
/// read after every identity stored on the stream before the lock (else `None`: run it again,
/// under the lock now held, for a read that is).
#[derive(Debug, Clone)]
pub struct LockedOne {
    /// The stream's row as locked.
    pub stream: StreamRow,
    /// The context, when current.
    pub context: Option<GroupContext>,
}

/// `group_lock_context_one.sql`: locks the stream of `q` and reads its context in one
/// statement; `None` when the stream does not exist.
pub async fn group_lock_context_one<'e>(
    ex: impl PgExecutor<'e>,
    q: &LoneQuery<'_>,
    ahead_rows_max: i64,
) -> Result<Option<LockedOne>, sqlx::Error> {
    let rows = sqlx::query(include_str!(
        "../../../sql/inbox/group_lock_context_one.sql"
    ))
    .bind(q.stream.tenant_id)
    .bind(q.stream.project_id)
    .bind(q.stream.producer_kind)
    .bind(q.stream.producer_id)
    .bind(q.event_id)
    .bind(q.idempotency_key)
    .bind(q.producer_sequence.to_string())
    .bind(ahead_rows_max)
    .bind(q.credential_id)
    .bind(q.key_tenant)
    .bind(q.key_project)
    .bind(q.key_id)
    .fetch_all(ex)
    .await?;
    let mut stream = None;
    let mut context = GroupContext::default();
    for r in rows {
        if r.try_get::<&str, _>(0)? == "stream" {
            let row = StreamRow {
                stream_id: r.try_get(1)?,
                acknowledged_sequence: seq(r.try_get(17)?)?,
                replay_floor: seq(r.try_get(18)?)?,
            };
            stream = Some((row, r.try_get::<bool, _>(19)?));
        } else {
            context_row(&r, &mut context)?;
        }
    }
    // UNION ALL does not keep the subquery's order.
    context.ahead.sort_unstable();
    Ok(stream.map(|(stream, current)| LockedOne {
        stream,
        context: current.then_some(context),
    }))
}

/// `group_context.sql`: see [`GroupQuery`] and [`GroupContext`]. A group of one envelope on one
/// stream reads through [`group_lock_context_one`] instead.
pub async fn group_context<'e>(
    ex: impl PgExecutor<'e>,
    q: &GroupQuery<'_>,
    ahead_rows_max: i64,
) -> Result<GroupContext, sqlx::Error> {
    let sequences: Vec<String> = q.producer_sequence.iter().map(u64::to_string).collect();
    let cursors: Vec<String> = q.cursor.iter().map(u64::to_string).collect();
    let rows = sqlx::query(include_str!("../../../sql/inbox/group_context.sql"))
        .bind(&q.candidate_stream)
        .bind(&q.event_id)
        .bind(&q.idempotency_key)
        .bind(&sequences)
        .bind(&q.stream_id)
        .bind(&cursors)
        .bind(ahead_rows_max)
        .bind(&q.credential_id)
        .bind(&q.key_tenant)
        .bind(&q.key_project)
        .bind(&q.key_id)
        .fetch_all(ex)
        .await?;
    let mut context = GroupContext::default();
    for r in rows {
        context_row(&r, &mut context)?;
    }
    // UNION ALL does not keep the subquery's order.
    context.ahead.sort_unstable();
    Ok(context)
}

/// One row of a context read (the columns both context statements share) into `context`.
fn context_row(r: &PgRow, context: &mut GroupContext) -> Result<(), sqlx::Error> {
    let kind: &str = r.try_get(0)?;
    match kind {
        "match" => context.matching.push((
            r.try_get(1)?,
            IdentityRow {
                event_id: r.try_get(2)?,
                idempotency_key: r.try_get(3)?,
                producer_sequence: seq(r.try_get(4)?)?,
                content_sha256: r.try_get(5)?,
                outcome: r.try_get(6)?,
                correlation_id: r.try_get(7)?,
            },
        )),
        "ahead" => context.ahead.push((r.try_get(1)?, seq(r.try_get(4)?)?)),
        "credential" => context.live_credentials.push(r.try_get(8)?),
        "key" => context.keys.push((
            (r.try_get(9)?, r.try_get(10)?),
            VerifyKeyRow {
                key_id: r.try_get(11)?,
                public_key: r.try_get(12)?,
                state: r.try_get(13)?,
                retired_at: r.try_get(14)?,
                replay_window_seconds: r.try_get(15)?,
                now: r.try_get(16)?,
            },
        )),
        other => {
            return Err(sqlx::Error::Decode(
                format!("context row of unknown kind {other:?}").into(),
            ));
        }
    }
    Ok(())
}

/// Columns of a group commit's writes (see `group_commit.sql`): identities with their stream,
/// cursor moves, and audit rows with their scope.
#[derive(Debug, Default, Clone)]
pub struct GroupWrite {
    /// The stream of each accepted envelope.
    pub stream_id: Vec<i64>,
    /// The accepted envelopes.
    pub accepted: IdentityBatch,
    /// Streams whose cursor is written.
    pub cursor_stream: Vec<i64>,
    /// Their new cursors.
    pub cursor: Vec<u64>,
    /// Audit tenant per row.
    pub audit_tenant: Vec<String>,
    /// Audit project per row.
    pub audit_project: Vec<Option<String>>,
    /// Audit actor account per row.
    pub audit_account: Vec<String>,
    /// Audit actor device per row.
    pub audit_device: Vec<Option<String>>,
    /// Audit producer kind per row.
    pub audit_producer_kind: Vec<String>,
    /// Audit producer id per row.
    pub audit_producer_id: Vec<String>,
    /// The decisions.
    pub audit: AuditBatch,
}

/// `group_commit.sql`: every write of a group commit in one statement.
pub async fn group_commit<'e>(
    ex: impl PgExecutor<'e>,
    w: &GroupWrite,
) -> Result<Committed, sqlx::Error> {
    let a = &w.accepted;
    let sequences: Vec<String> = a.producer_sequence.iter().map(u64::to_string).collect();
    let cursors: Vec<String> = w.cursor.iter().map(u64::to_string).collect();
    let audit_sequences: Vec<Option<String>> = w
        .audit
        .producer_sequence
        .iter()
        .map(|s| s.map(|s| s.to_string()))
        .collect();
    let (identities, payloads, audited): (i64, i64, i64) =
        sqlx::query_as(include_str!("../../../sql/inbox/group_commit.sql"))
            .bind(&w.stream_id)
            .bind(&a.event_id)
            .bind(&a.idempotency_key)
            .bind(&sequences)
            .bind(&a.content_sha256)
            .bind(&a.event_type)
            .bind(&a.key_id)
            .bind(&a.outcome)
            .bind(&a.correlation_id)
            .bind(&a.occurred_at)
            .bind(&a.payload)
            .bind(&w.cursor_stream)
            .bind(&cursors)
            .bind(&w.audit_tenant)
            .bind(&w.audit_project)
            .bind(&w.audit_account)
            .bind(&w.audit_device)
            .bind(&w.audit_producer_kind)
            .bind(&w.audit_producer_id)
            .bind(&w.audit.event_id_sha256)
            .bind(&audit_sequences)
            .bind(&w.audit.outcome)
            .bind(&w.audit.reason)
            .bind(&w.audit.correlation_id)
            .fetch_one(ex)
            .await?;
    Ok(Committed {
        identities,
        payloads,
        audited,
    })
}

/// What `group_commit_presumed.sql` holds the database to before it writes: the stream, by its
/// key, is as the envelope's sequence presumes, and its credential and key are as the request
/// found them.
#[derive(Debug, Clone, Copy)]
pub struct Presumption<'a> {
    /// The stream, by its key (the key's scope is its tenant and project).
    pub stream: StreamKey<'a>,
    /// The request's credential, which must not be revoked.
    pub credential_id: i64,
    /// The public key that verified the envelope, which must still be the active one of its id.
    pub public_key: &'a [u8],
}

/// `store_presumed.sql` (the function of migration 0019): the one identity and the one audit
/// row of `w` (a lone envelope decided against `p`'s presumed state), with its payload and its
/// cursor move, written and committed in one statement when `p` holds; `Ok(false)` when it
/// does not, and nothing was written. Run it outside a transaction: its own commit is what the
/// answer waits for.
pub async fn store_presumed<'e>(
    ex: impl PgExecutor<'e>,
    p: &Presumption<'_>,
    w: &GroupWrite,
) -> Result<bool, sqlx::Error> {
    let a = &w.accepted;
    let (
        [event_id],
        [idempotency_key],
        [sequence],
        [digest],
        [event_type],
        [key_id],
        [outcome],
        [correlation_id],
        [occurred_at],
        [payload],
    ) = (
        a.event_id.as_slice(),
        a.idempotency_key.as_slice(),
        a.producer_sequence.as_slice(),
        a.content_sha256.as_slice(),
        a.event_type.as_slice(),
        a.key_id.as_slice(),
        a.outcome.as_slice(),
        a.correlation_id.as_slice(),
        a.occurred_at.as_slice(),
        a.payload.as_slice(),
    )
    else {
        return Err(sqlx::Error::InvalidArgument(
            "a presumed store writes exactly one identity".into(),
        ));
    };
    let (
        [audit_tenant],
        [audit_project],
        [audit_account],
        [audit_device],
        [event_id_sha256],
        [audit_outcome],
        [reason],
    ) = (
        w.audit_tenant.as_slice(),
        w.audit_project.as_slice(),
        w.audit_account.as_slice(),
        w.audit_device.as_slice(),
        w.audit.event_id_sha256.as_slice(),
        w.audit.outcome.as_slice(),
        w.audit.reason.as_slice(),
    )
    else {
        return Err(sqlx::Error::InvalidArgument(
            "a presumed store writes exactly one audit row".into(),
        ));
    };
    let (stored,): (bool,) = sqlx::query_as(include_str!("../../../sql/inbox/store_presumed.sql"))
        .bind(p.stream.tenant_id)
        .bind(p.stream.project_id)
        .bind(p.stream.producer_kind)
        .bind(p.stream.producer_id)
        .bind(event_id)
        .bind(idempotency_key)
        .bind(sequence.to_string())
        .bind(digest)
        .bind(event_type)
        .bind(key_id)
        .bind(outcome)
        .bind(correlation_id)
        .bind(occurred_at)
        .bind(payload)
        .bind(p.credential_id)
        .bind(p.public_key)
        .bind(audit_tenant)
        .bind(audit_project)
        .bind(audit_account)
        .bind(audit_device)
        .bind(event_id_sha256)
        .bind(audit_outcome)
        .bind(reason)
        .fetch_one(ex)
        .await?;
    Ok(stored)
}
