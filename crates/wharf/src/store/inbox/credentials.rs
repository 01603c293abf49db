//! Tenant and credential statements of the inbox (`sql/inbox/tenant_*.sql`,
//! `credential_*.sql`): creating tenants, issuing, finding, revoking and listing producer
//! credentials.
//!
//! Owns: statement text and row shapes, as the rest of [`super`]. Must not know: when a
//! credential authenticates (`crate::inbox::credentials` decides).

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};

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

/// `tenant_insert.sql`: true when the tenant was created, false when it existed.
pub async fn tenant_insert<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../../sql/inbox/tenant_insert.sql"))
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
    sqlx::query_as(include_str!("../../../sql/inbox/tenant_list.sql"))
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
    sqlx::query_as(include_str!("../../../sql/inbox/credential_insert.sql"))
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
    let rows = sqlx::query(include_str!("../../../sql/inbox/credential_by_lookup.sql"))
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
        sqlx::query(include_str!("../../../sql/inbox/credential_revoke.sql"))
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
    let rows = sqlx::query(include_str!("../../../sql/inbox/credential_list.sql"))
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
