//! Inbox statements: one `.sql` file under `sql/inbox/` each, one small function each.
//!
//! Owns: the SQL text and the translation between Rust values and columns (u64 sequences travel
//! as text because the table holds them as `numeric(20,0)`; PostgreSQL's bigint is too narrow).
//!
//! Must not know: what a decision is, when a key may verify, or which outcome applies. Every
//! function takes the caller's executor first (a transaction when the write must be atomic with
//! others) and values the [`crate::inbox`] module already decided.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};

mod keys;
pub use keys::*;

/// A stored credential candidate for a presented token (see `credential_by_lookup.sql`).
#[derive(Debug, Clone)]
pub struct CredentialRow {
    /// The credential's id.
    pub credential_id: i64,
    /// Its tenant.
    pub tenant_id: String,
    /// Its account.
    pub account_id: String,
    /// Its device, when it names one.
    pub device_id: Option<String>,
    /// SHA-256 of the token's 32 random bytes.
    pub token_sha256: Vec<u8>,
    /// Whether it was revoked.
    pub revoked: bool,
}

/// A credential as listed to an operator (never the hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialListRow {
    /// The credential's id.
    pub credential_id: i64,
    /// Its tenant.
    pub tenant_id: String,
    /// Its account.
    pub account_id: String,
    /// Its device, when it names one.
    pub device_id: Option<String>,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRow {
    /// The stream's id.
    pub stream_id: i64,
    /// The contiguous cursor.
    pub acknowledged_sequence: u64,
    /// The replay floor.
    pub replay_floor: u64,
}

/// A stream as shown to an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamListRow {
    /// The stream's id.
    pub stream_id: i64,
    /// Its tenant.
    pub tenant_id: String,
    /// Its project.
    pub project_id: String,
    /// `device` or `account`.
    pub producer_kind: String,
    /// The device or account id.
    pub producer_id: String,
    /// The contiguous cursor.
    pub acknowledged_sequence: u64,
    /// The replay floor.
    pub replay_floor: u64,
    /// Accepted identities beyond the cursor (waiting for a gap to close).
    pub retained_ahead: i64,
    /// When the stream first appeared.
    pub created_at: DateTime<Utc>,
    /// When its cursor or floor last moved.
    pub updated_at: DateTime<Utc>,
}

/// The stream key as the store sees it.
#[derive(Debug, Clone, Copy)]
pub struct StreamKey<'a> {
    /// The tenant.
    pub tenant_id: &'a str,
    /// The project.
    pub project_id: &'a str,
    /// `device` or `account`.
    pub producer_kind: &'a str,
    /// The device or account id.
    pub producer_id: &'a str,
}

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

/// Who an ingest audit batch is about: the same for every row of one request.
#[derive(Debug, Clone, Copy)]
pub struct AuditScope<'a> {
    /// The verified tenant.
    pub tenant_id: &'a str,
    /// The route's project, when it is a valid identity.
    pub project_id: Option<&'a str>,
    /// The verified account.
    pub actor_account: &'a str,
    /// The verified device.
    pub actor_device: Option<&'a str>,
    /// `device` or `account`.
    pub producer_kind: &'a str,
    /// The producer id.
    pub producer_id: &'a str,
}

/// Audit columns, one element per decision (see `audit_insert.sql`).
#[derive(Debug, Default, Clone)]
pub struct AuditBatch {
    /// SHA-256 hex of the event id, when the envelope got far enough to have one.
    pub event_id_sha256: Vec<Option<String>>,
    /// The sequence, when known.
    pub producer_sequence: Vec<Option<u64>>,
    /// The outcome.
    pub outcome: Vec<&'static str>,
    /// The stable reason.
    pub reason: Vec<&'static str>,
    /// The request's correlation id.
    pub correlation_id: Vec<String>,
}

/// One operator action on a stream, for the audit.
#[derive(Debug, Clone, Copy)]
pub struct OperatorAudit<'a> {
    /// `stream-skip` or `stream-advance-floor`.
    pub action: &'static str,
    /// The stream.
    pub stream: StreamKey<'a>,
    /// Who did it.
    pub operator: &'a str,
    /// Cursor or floor before.
    pub before: u64,
    /// Cursor or floor after.
    pub after: u64,
    /// Why (operator's stable reason text).
    pub reason: &'a str,
    /// The action's correlation id.
    pub correlation_id: &'a str,
}

fn seq(text: &str) -> Result<u64, sqlx::Error> {
    text.parse()
        .map_err(|e| sqlx::Error::Decode(format!("sequence {text:?} is not a u64: {e}").into()))
}

/// `tenant_insert.sql`: true when the tenant was created, false when it existed.
pub async fn tenant_insert<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../sql/inbox/tenant_insert.sql"))
            .bind(tenant_id)
            .fetch_optional(ex)
            .await?
            .is_some(),
    )
}

/// `tenant_list.sql`.
pub async fn tenant_list<'e>(
    ex: impl PgExecutor<'e>,
) -> Result<Vec<(String, DateTime<Utc>)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/inbox/tenant_list.sql"))
        .fetch_all(ex)
        .await
}

/// `credential_insert.sql`: the new credential's id and issue time.
pub async fn credential_insert<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    account_id: &str,
    device_id: Option<&str>,
    token_lookup: &[u8],
    token_sha256: &[u8],
) -> Result<(i64, DateTime<Utc>), sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/inbox/credential_insert.sql"))
        .bind(tenant_id)
        .bind(account_id)
        .bind(device_id)
        .bind(token_lookup)
        .bind(token_sha256)
        .fetch_one(ex)
        .await
}

/// `credential_by_lookup.sql`: candidates sharing the hash's first 8 bytes.
pub async fn credential_by_lookup<'e>(
    ex: impl PgExecutor<'e>,
    token_lookup: &[u8],
) -> Result<Vec<CredentialRow>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../sql/inbox/credential_by_lookup.sql"))
        .bind(token_lookup)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(CredentialRow {
                credential_id: r.try_get(0)?,
                tenant_id: r.try_get(1)?,
                account_id: r.try_get(2)?,
                device_id: r.try_get(3)?,
                token_sha256: r.try_get(4)?,
                revoked: r.try_get(5)?,
            })
        })
        .collect()
}

/// `credential_revoke.sql`: true when a live credential was revoked.
pub async fn credential_revoke<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    credential_id: i64,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../sql/inbox/credential_revoke.sql"))
            .bind(tenant_id)
            .bind(credential_id)
            .fetch_optional(ex)
            .await?
            .is_some(),
    )
}

/// `credential_list.sql`.
pub async fn credential_list<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
) -> Result<Vec<CredentialListRow>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../sql/inbox/credential_list.sql"))
        .bind(tenant_id)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(CredentialListRow {
                credential_id: r.try_get(0)?,
                tenant_id: r.try_get(1)?,
                account_id: r.try_get(2)?,
                device_id: r.try_get(3)?,
                created_at: r.try_get(4)?,
                revoked_at: r.try_get(5)?,
            })
        })
        .collect()
}

/// `stream_lock.sql`: the stream's row, locked until the transaction ends; `None` when missing.
pub async fn stream_lock<'e>(
    ex: impl PgExecutor<'e>,
    key: StreamKey<'_>,
) -> Result<Option<StreamRow>, sqlx::Error> {
    let row = sqlx::query(include_str!("../../sql/inbox/stream_lock.sql"))
        .bind(key.tenant_id)
        .bind(key.project_id)
        .bind(key.producer_kind)
        .bind(key.producer_id)
        .fetch_optional(ex)
        .await?;
    row.map(|r| {
        Ok(StreamRow {
            stream_id: r.try_get(0)?,
            acknowledged_sequence: seq(r.try_get(1)?)?,
            replay_floor: seq(r.try_get(2)?)?,
        })
    })
    .transpose()
}

/// `stream_ahead.sql`: retained sequences in `cursor+1 ..= cursor+rows_max`, ascending.
pub async fn stream_ahead<'e>(
    ex: impl PgExecutor<'e>,
    stream_id: i64,
    cursor: u64,
    rows_max: i64,
) -> Result<Vec<u64>, sqlx::Error> {
    let rows: Vec<String> = sqlx::query_scalar(include_str!("../../sql/inbox/stream_ahead.sql"))
        .bind(stream_id)
        .bind(cursor.to_string())
        .bind(rows_max)
        .fetch_all(ex)
        .await?;
    rows.iter().map(|text| seq(text)).collect()
}

/// `stream_set_cursor.sql`.
pub async fn stream_set_cursor<'e>(
    ex: impl PgExecutor<'e>,
    stream_id: i64,
    acknowledged_sequence: u64,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/inbox/stream_set_cursor.sql"))
        .bind(stream_id)
        .bind(acknowledged_sequence.to_string())
        .execute(ex)
        .await?;
    Ok(())
}

/// `stream_set_floor.sql`.
pub async fn stream_set_floor<'e>(
    ex: impl PgExecutor<'e>,
    stream_id: i64,
    replay_floor: u64,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/inbox/stream_set_floor.sql"))
        .bind(stream_id)
        .bind(replay_floor.to_string())
        .execute(ex)
        .await?;
    Ok(())
}

/// `stream_list.sql`: streams of a project, one producer's when `producer` is given.
pub async fn stream_list<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    producer: Option<(&str, &str)>,
    rows_max: i64,
) -> Result<Vec<StreamListRow>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../sql/inbox/stream_list.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(producer.map(|p| p.0))
        .bind(producer.map(|p| p.1))
        .bind(rows_max)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(StreamListRow {
                stream_id: r.try_get(0)?,
                tenant_id: r.try_get(1)?,
                project_id: r.try_get(2)?,
                producer_kind: r.try_get(3)?,
                producer_id: r.try_get(4)?,
                acknowledged_sequence: seq(r.try_get(5)?)?,
                replay_floor: seq(r.try_get(6)?)?,
                created_at: r.try_get(7)?,
                updated_at: r.try_get(8)?,
                retained_ahead: r.try_get(9)?,
            })
        })
        .collect()
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

/// `audit_insert.sql`: appends ingest audit rows when `credential_id` is still live; returns
/// whether it was, and the stream's cursor as this statement sees it (0 when the stream does
/// not exist).
pub async fn audit_insert<'e>(
    ex: impl PgExecutor<'e>,
    scope: AuditScope<'_>,
    batch: &AuditBatch,
    credential_id: i64,
) -> Result<(bool, u64), sqlx::Error> {
    let sequences: Vec<Option<String>> = batch
        .producer_sequence
        .iter()
        .map(|s| s.map(|s| s.to_string()))
        .collect();
    let (live, text): (bool, String) =
        sqlx::query_as(include_str!("../../sql/inbox/audit_insert.sql"))
            .bind(scope.tenant_id)
            .bind(scope.project_id)
            .bind(scope.actor_account)
            .bind(scope.actor_device)
            .bind(scope.producer_kind)
            .bind(scope.producer_id)
            .bind(&batch.event_id_sha256)
            .bind(&sequences)
            .bind(&batch.outcome)
            .bind(&batch.reason)
            .bind(&batch.correlation_id)
            .bind(credential_id)
            .fetch_one(ex)
            .await?;
    Ok((live, seq(&text)?))
}

/// `audit_insert_operator.sql`: appends one operator-action audit row.
pub async fn audit_insert_operator<'e>(
    ex: impl PgExecutor<'e>,
    audit: OperatorAudit<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/inbox/audit_insert_operator.sql"))
        .bind(audit.action)
        .bind(audit.stream.tenant_id)
        .bind(audit.stream.project_id)
        .bind(audit.operator)
        .bind(audit.stream.producer_kind)
        .bind(audit.stream.producer_id)
        .bind(audit.before.to_string())
        .bind(audit.after.to_string())
        .bind(audit.reason)
        .bind(audit.correlation_id)
        .execute(ex)
        .await?;
    Ok(())
}

/// `payloads_delete_expired.sql`: deletes at most `batch_max` payloads stored before
/// `older_than`; returns how many.
pub async fn payloads_delete_expired<'e>(
    ex: impl PgExecutor<'e>,
    older_than: DateTime<Utc>,
    batch_max: i64,
) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../sql/inbox/payloads_delete_expired.sql"))
            .bind(older_than)
            .bind(batch_max)
            .execute(ex)
            .await?
            .rows_affected(),
    )
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

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.tenant_id.len()
    }
}

/// `group_lock.sql`: locks the streams that exist, in stream id order; `(index into keys,
/// stream)` for each found.
pub async fn group_lock<'e>(
    ex: impl PgExecutor<'e>,
    keys: &StreamKeys,
) -> Result<Vec<(usize, StreamRow)>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../sql/inbox/group_lock.sql"))
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
    sqlx::query(include_str!("../../sql/inbox/group_streams_insert.sql"))
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

/// `group_context.sql`: see [`GroupQuery`] and [`GroupContext`].
pub async fn group_context<'e>(
    ex: impl PgExecutor<'e>,
    q: &GroupQuery<'_>,
    ahead_rows_max: i64,
) -> Result<GroupContext, sqlx::Error> {
    let sequences: Vec<String> = q.producer_sequence.iter().map(u64::to_string).collect();
    let cursors: Vec<String> = q.cursor.iter().map(u64::to_string).collect();
    let rows = sqlx::query(include_str!("../../sql/inbox/group_context.sql"))
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
            _ => context.keys.push((
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
        }
    }
    // UNION ALL does not keep the subquery's order.
    context.ahead.sort_unstable();
    Ok(context)
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
        sqlx::query_as(include_str!("../../sql/inbox/group_commit.sql"))
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
