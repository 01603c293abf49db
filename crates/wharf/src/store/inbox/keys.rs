//! Verification-key statements of the inbox (`sql/inbox/key_*.sql`, `keys_*.sql`,
//! `audit_insert_key.sql`): adding, retiring, revoking, listing, the keys a verification needs,
//! and what removing a revoked key must check first.
//!
//! Owns: statement text and row shapes, as the rest of [`super`]. Must not know: when a key may
//! verify or be removed (`crate::inbox::keys` decides).

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};

/// A verification key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    /// The tenant scope.
    pub tenant_id: String,
    /// The project scope.
    pub project_id: String,
    /// The key id envelopes name.
    pub key_id: String,
    /// The Ed25519 public key.
    pub public_key: Vec<u8>,
    /// `active`, `retired` or `revoked`.
    pub state: String,
    /// How long a retired key keeps verifying, in seconds.
    pub replay_window_seconds: i64,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// When it was retired.
    pub retired_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key named by an ingest request, with the database clock (see `keys_for_verify.sql`).
#[derive(Debug, Clone)]
pub struct VerifyKeyRow {
    /// The key id.
    pub key_id: String,
    /// The Ed25519 public key.
    pub public_key: Vec<u8>,
    /// `active`, `retired` or `revoked`.
    pub state: String,
    /// When it was retired.
    pub retired_at: Option<DateTime<Utc>>,
    /// How long a retired key keeps verifying, in seconds.
    pub replay_window_seconds: i64,
    /// The database's `now()`.
    pub now: DateTime<Utc>,
}

/// A locked stream's state.
/// `key_insert.sql`: true when added, false when the key id already exists in the scope.
pub async fn key_insert<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
    public_key: &[u8],
    replay_window_seconds: i64,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../../sql/inbox/key_insert.sql"))
            .bind(tenant_id)
            .bind(project_id)
            .bind(key_id)
            .bind(public_key)
            .bind(replay_window_seconds)
            .fetch_optional(ex)
            .await?
            .is_some(),
    )
}

/// `key_retire.sql`: true when an active key was retired.
pub async fn key_retire<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../../sql/inbox/key_retire.sql"))
            .bind(tenant_id)
            .bind(project_id)
            .bind(key_id)
            .fetch_optional(ex)
            .await?
            .is_some(),
    )
}

/// `key_revoke.sql`: true when an active or retired key was revoked.
pub async fn key_revoke<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../../sql/inbox/key_revoke.sql"))
            .bind(tenant_id)
            .bind(project_id)
            .bind(key_id)
            .fetch_optional(ex)
            .await?
            .is_some(),
    )
}

/// `key_list.sql`: the tenant's keys, of one project when given.
pub async fn key_list<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: Option<&str>,
) -> Result<Vec<KeyRow>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../../sql/inbox/key_list.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(KeyRow {
                tenant_id: r.try_get(0)?,
                project_id: r.try_get(1)?,
                key_id: r.try_get(2)?,
                public_key: r.try_get(3)?,
                state: r.try_get(4)?,
                replay_window_seconds: r.try_get(5)?,
                created_at: r.try_get(6)?,
                retired_at: r.try_get(7)?,
                revoked_at: r.try_get(8)?,
            })
        })
        .collect()
}

/// `keys_for_verify.sql`: the named keys in the (tenant, project) scope.
pub async fn keys_for_verify<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_ids: &[&str],
) -> Result<Vec<VerifyKeyRow>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../../sql/inbox/keys_for_verify.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(key_ids)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(VerifyKeyRow {
                key_id: r.try_get(0)?,
                public_key: r.try_get(1)?,
                state: r.try_get(2)?,
                retired_at: r.try_get(3)?,
                replay_window_seconds: r.try_get(4)?,
                now: r.try_get(5)?,
            })
        })
        .collect()
}

/// `key_lock.sql`: one key's state and replay window, locked. `None`: no such key.
pub async fn key_lock<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
) -> Result<Option<(String, i64)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../../sql/inbox/key_lock.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(key_id)
        .fetch_optional(ex)
        .await
}

/// What `key_replayable.sql` counts.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Replayable {
    pub envelopes: i64,
    pub streams: i64,
    pub newest_accepted_at: Option<DateTime<Utc>>,
}

/// `key_replayable.sql`: the envelopes `key_id` accepted that can still be replayed.
pub async fn key_replayable<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
    replay_window_s: i64,
) -> Result<Replayable, sqlx::Error> {
    sqlx::query_as(include_str!("../../../sql/inbox/key_replayable.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(key_id)
        .bind(replay_window_s)
        .fetch_one(ex)
        .await
}

/// `key_delete.sql`: deletes a revoked key; false when there was none.
pub async fn key_delete<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../../sql/inbox/key_delete.sql"))
            .bind(tenant_id)
            .bind(project_id)
            .bind(key_id)
            .fetch_optional(ex)
            .await?
            .is_some(),
    )
}

/// `keys_removable.sql`: (tenant, project, key id) of revoked keys nothing replayable depends
/// on, at most `limit`.
pub async fn keys_removable<'e>(
    ex: impl PgExecutor<'e>,
    limit: i64,
) -> Result<Vec<(String, String, String)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../../sql/inbox/keys_removable.sql"))
        .bind(limit)
        .fetch_all(ex)
        .await
}

/// `audit_insert_key.sql`: appends one key-removal audit row.
pub async fn audit_insert_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    operator: &str,
    key_id: &str,
    reason: &str,
    correlation_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../../sql/inbox/audit_insert_key.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(operator)
        .bind(key_id)
        .bind(reason)
        .bind(correlation_id)
        .execute(ex)
        .await
        .map(|_| ())
}
